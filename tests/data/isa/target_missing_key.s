.target rows=4, cols=4
