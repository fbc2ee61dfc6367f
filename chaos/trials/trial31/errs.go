package main

import "errors"

var errorsIs = errors.Is
