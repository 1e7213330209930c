//go:build wasip1

package arbiter

import "unsafe"

// Memory ownership (plugin-sdk/ABI.md "Memory"): the guest owns every
// buffer. arbiter_alloc hands out a Go byte slice for the host to write
// the request into; a hook's response is a Go byte slice whose address
// and length it returns. Both must outlive the Go code that made them —
// the host writes the request after arbiter_alloc returns and reads the
// response after the hook returns — so each is kept reachable in pinned
// for the rest of the instance's life. Go's collector does not move heap
// objects, so a reachable slice stays where the host was told it is.
// Nothing is freed: every call runs in a fresh instance.
var pinned [][]byte

// empty backs zero-length buffers, so their address is valid memory.
var empty [1]byte

//go:wasmexport arbiter_abi_version
func abiVersion() int32 { return 1 }

//go:wasmexport arbiter_alloc
func alloc(n int32) int32 {
	if n <= 0 {
		return int32(uintptr(unsafe.Pointer(&empty[0])))
	}
	buf := make([]byte, n)
	pinned = append(pinned, buf)
	return int32(uintptr(unsafe.Pointer(&buf[0])))
}

// Serve runs one exported hook: the request at ptr..ptr+n (written by the
// host into a buffer from arbiter_alloc) is passed to run; its response is
// pinned and returned as (ptr << 32) | len. An error is logged and
// answered with an empty response, which the host refuses as a bad
// output: the policy's failurePolicy decides. The hook packages call it.
func Serve(ptr, n int32, run func(request []byte) ([]byte, error)) int64 {
	var request []byte
	if n > 0 {
		// The host wrote the request into linear memory at ptr: a Go
		// pointer to it is the address itself.
		request = unsafe.Slice((*byte)(unsafe.Add(nil, uintptr(uint32(ptr)))), n)
	}
	response, err := run(request)
	if err != nil {
		Log(Error, err.Error())
		return 0
	}
	return Respond(response)
}

// Respond pins b and packs its address and length as an ABI result.
func Respond(b []byte) int64 {
	if len(b) == 0 {
		return 0
	}
	pinned = append(pinned, b)
	return int64(uintptr(unsafe.Pointer(&b[0])))<<32 | int64(len(b))
}

//go:wasmimport arbiter log
func hostLog(level int32, ptr unsafe.Pointer, n int32)

func writeLog(level Level, message string) {
	if message == "" {
		return
	}
	b := []byte(message)
	hostLog(int32(level), unsafe.Pointer(&b[0]), int32(len(b)))
}
