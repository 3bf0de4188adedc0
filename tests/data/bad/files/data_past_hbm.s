# .data whose end is past the 64 MiB HBM of tiny
.data 0x3fffff0
X: .space 64
.core 0
halt
