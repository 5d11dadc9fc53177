package testsvc

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Serve runs h on 127.0.0.1 at a free port and returns its base URL and a
// function that stops it (safe to call more than once). It panics when no
// loopback port can be had, as httptest.NewServer does: a test cannot go on.
func Serve(h http.Handler) (url string, stop func()) {
	urls, stop := ServeN(h)
	return urls[0], stop
}

// ServeN runs each handler on its own free 127.0.0.1 port (one instance
// each) and returns their base URLs in order and one function that stops
// them all.
func ServeN(hs ...http.Handler) (urls []string, stop func()) {
	var servers []*http.Server
	var wg sync.WaitGroup
	stopAll := func() {
		for _, s := range servers {
			_ = s.Close()
		}
		wg.Wait()
	}
	for i, h := range hs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			stopAll()
			panic(fmt.Sprintf("testsvc: instance %d: listen on 127.0.0.1: %v", i, err))
		}
		s := NewServer(h)
		servers = append(servers, s)
		urls = append(urls, "http://"+ln.Addr().String())
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.Serve(ln) // http.ErrServerClosed once stopped
		}()
	}
	var once sync.Once
	return urls, func() { once.Do(stopAll) }
}

// NewServer wraps h in an http.Server with the timeouts a service on a
// shared machine needs.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
	}
}
