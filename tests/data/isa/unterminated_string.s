    trace.begin "abc
