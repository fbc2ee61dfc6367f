module github.com/simba-go/simba

go 1.26
