.dta
