.bss
.word 1
