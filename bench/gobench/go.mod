module gatewaybench/gobench

go 1.21
