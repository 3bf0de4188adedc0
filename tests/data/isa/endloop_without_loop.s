    endloop
