// An HTTP/1.1 server on Go's net/http that answers, flushes, and then works on (a log line, a
// cache update) before its handler returns: a kept-alive client's next request arrives
// meanwhile, and the server's background one-byte read (its way of noticing a client that
// closes) takes that request's first byte, the rest coming in the connection's next read.
//
// Usage: flush_then_work --port PORT
package main

import (
	"flag"
	"net/http"
	"strconv"
	"time"
)

var body = []byte("hello\n")

func handle(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
	w.(http.Flusher).Flush()
	time.Sleep(2 * time.Millisecond)
}

func main() {
	port := flag.Int("port", 8080, "TCP port on 127.0.0.1")
	flag.Parse()
	http.HandleFunc("/", handle)
	panic(http.ListenAndServe("127.0.0.1:"+strconv.Itoa(*port), nil))
}
