loop 2
loop 2
loop 2
loop 2
loop 2
loop 2
loop 2
loop 2
loop 2
endloop
endloop
endloop
endloop
endloop
endloop
endloop
endloop
endloop
