package arbiter

import "strings"

// Handle decodes a hook request, runs h on it and encodes its response:
// what every exported hook does, minus the raw memory. Call it in tests
// with the exact JSON the host sends (`arbiter policy eval` prints it).
func Handle[Req any, Resp interface{ AppendJSON([]byte) []byte }](
	request []byte,
	decode func(*Req, []byte) error,
	h func(*Req) (Resp, error),
) ([]byte, error) {
	var req Req
	if err := decode(&req, request); err != nil {
		return nil, err
	}
	resp, err := h(&req)
	if err != nil {
		return nil, err
	}
	return resp.AppendJSON(nil), nil
}

// WeightFields returns the JSON list `arbiter_weight_fields` answers for
// the names a weight hook reads (plugin-sdk/ABI.md "Lean weight
// requests"), or panics naming an unknown name: no names means every
// field. `now` and `params` are always sent and may be named.
func WeightFields(reads ...string) []byte {
	if len(reads) == 0 {
		reads = WeightFieldNames
	}
	out := []byte{'['}
	for i, name := range reads {
		known := name == "now" || name == "params"
		for _, n := range WeightFieldNames {
			known = known || n == name
		}
		if !known {
			panic("arbiter: weight.Export: unknown weight field " + name + "; the fields are " +
				strings.Join(WeightFieldNames, ", "))
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = appendString(out, name)
	}
	return append(out, ']')
}
