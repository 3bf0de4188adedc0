    trace.begin "a\q"
