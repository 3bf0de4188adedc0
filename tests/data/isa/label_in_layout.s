.data
.zero end
end:
