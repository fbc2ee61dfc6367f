module github.com/simba-go/simba/gen

go 1.26

require (
	github.com/dave/jennifer v1.7.1
	go.yaml.in/yaml/v3 v3.0.4
)
