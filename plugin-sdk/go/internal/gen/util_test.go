package main

import "encoding/json"

func jsonUnmarshal(text string, v any) error { return json.Unmarshal([]byte(text), v) }
