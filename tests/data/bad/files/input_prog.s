# one 16-byte symbol
.data
X: .space 16
.core 0
halt
