.data
.byte 300
