module karui/benchpeer

go 1.19
