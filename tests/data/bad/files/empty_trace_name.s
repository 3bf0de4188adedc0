# a trace name the ELF cannot hold
.core 0
trace.begin ""
halt
