// gobench: the Go side of the benchmarks, so that the client (and a stand-in backend) are never
// what limits a measurement of the gateway or of a Go apiserver. Standard library only.
//
//	gobench load  -url U [-method M] [-body T] [-c 16] [-d 5s] [-max N] [-update] ...
//	gobench watch -url COLLECTION -body T [-watchers 1000] [-rate 100] [-d 10s] ...
//	gobench serve -listen ADDR -cert C -key K -client-ca CA
//
// load: closed loop over -c keep-alive HTTP/1.1 connections. URL and body are templates: {n} is a
// counter unique across the run (from -start), {w} the worker's index, {m} is n modulo -mod.
// -max stops after that many requests (a fill, or deleting what a create run made). -update
// makes each worker read its URL once, then PUT the body with {rv} set to the resourceVersion
// of its last answer (a real update with a precondition, as kube clients send it).
//
// watch: -watchers watches of the collection from its current resourceVersion, then -rate
// creates a second for -d, each body holding its send time ({sent}, Unix nanoseconds, in the
// annotation bench.example.com/sent); every watcher counts the events that carry one and their
// delivery latency (write start to the event's line read).
//
// serve: a minimal extension apiserver for the proxy benchmarks: mTLS against -client-ca,
// legacy discovery of any /apis/<group>/<version> with one resource "things", and a fixed
// object of about 1 KiB at any /apis/<group>/<version>/namespaces/<ns>/<resource>/<name>.
//
// load and watch print one JSON line on stdout.
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type headerList []string

func (h *headerList) String() string     { return strings.Join(*h, ",") }
func (h *headerList) Set(v string) error { *h = append(*h, v); return nil }

// common flags of load and watch: where to connect and as whom.
type target struct {
	cert, key, cacert, serverName string
	headers                       headerList
}

func (t *target) register(fs *flag.FlagSet) {
	fs.StringVar(&t.cert, "cert", "", "client certificate")
	fs.StringVar(&t.key, "key", "", "client key")
	fs.StringVar(&t.cacert, "cacert", "", "CA bundle to verify the server with")
	fs.StringVar(&t.serverName, "servername", "", "TLS server name to verify")
	fs.Var(&t.headers, "H", "request header K:V (repeatable)")
}

func (t *target) tlsConfig() *tls.Config {
	cfg := &tls.Config{ServerName: t.serverName}
	if t.cacert != "" {
		pem, err := os.ReadFile(t.cacert)
		die(err)
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		cfg.RootCAs = pool
	}
	if t.cert != "" {
		pair, err := tls.LoadX509KeyPair(t.cert, t.key)
		die(err)
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// client is one keep-alive HTTP/1.1 connection (a transport of its own per worker).
func (t *target) client(timeout time.Duration) *http.Client {
	tr := &http.Transport{TLSClientConfig: t.tlsConfig(), MaxIdleConnsPerHost: 1,
		DisableCompression: true, ForceAttemptHTTP2: false}
	return &http.Client{Transport: tr, Timeout: timeout}
}

func (t *target) request(method, url string, body []byte) *http.Request {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	die(err)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range t.headers {
		if k, v, ok := strings.Cut(h, ":"); ok {
			req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	return req
}

func die(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "gobench:", err)
		os.Exit(1)
	}
}

var resourceVersion = regexp.MustCompile(`"resourceVersion":"([0-9]+)"`)

// firstRV is the first resourceVersion in a JSON document: an object's (metadata comes before
// any field that could hold the word) or a list's.
func firstRV(body []byte) string {
	if m := resourceVersion.FindSubmatch(body); m != nil {
		return string(m[1])
	}
	return ""
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(p*float64(len(sorted)-1))]
}

func printJSON(v any) {
	out, err := json.Marshal(v)
	die(err)
	fmt.Println(string(out))
}

// -- load ------------------------------------------------------------------------------------

func load(args []string) {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	var t target
	t.register(fs)
	url := fs.String("url", "", "URL template ({n}, {w}, {m})")
	method := fs.String("method", "GET", "HTTP method")
	body := fs.String("body", "", "body template ({n}, {w}, {m}, {rv})")
	bodyFile := fs.String("body-file", "", "read the body template from this file (large bodies)")
	conns := fs.Int("c", 16, "connections")
	dur := fs.Duration("d", 5*time.Second, "duration")
	max := fs.Int64("max", 0, "stop after this many requests (0: no limit)")
	start := fs.Int64("start", 0, "first value of {n}")
	mod := fs.Int64("mod", 1, "{m} is n modulo this")
	update := fs.Bool("update", false, "read each worker's URL, then PUT with {rv} of the last answer")
	_ = fs.Parse(args)
	if *url == "" {
		die(fmt.Errorf("load: -url is required"))
	}
	if *bodyFile != "" {
		data, err := os.ReadFile(*bodyFile)
		die(err)
		*body = string(data)
	}
	fill := func(tpl string, n, w int64, rv string) string {
		r := strings.NewReplacer("{n}", strconv.FormatInt(n, 10), "{w}", strconv.FormatInt(w, 10),
			"{m}", strconv.FormatInt(n%*mod, 10), "{rv}", rv)
		return r.Replace(tpl)
	}
	var counter int64
	var mu sync.Mutex
	lat := make([]float64, 0, 1<<16)
	codes := map[string]int{}
	var firstError string
	deadline := time.Now().Add(*dur)
	var wg sync.WaitGroup
	began := time.Now()
	for w := 0; w < *conns; w++ {
		wg.Add(1)
		go func(w int64) {
			defer wg.Done()
			client := t.client(5 * time.Minute)
			mine := make([]float64, 0, 4096)
			mycodes := map[string]int{}
			myError := ""
			rv := ""
			if *update {
				resp, err := client.Do(t.request("GET", fill(*url, 0, w, ""), nil))
				if err == nil {
					data, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					rv = firstRV(data)
				}
			}
			for time.Now().Before(deadline) {
				n := atomic.AddInt64(&counter, 1) - 1
				if *max > 0 && n >= *max {
					break
				}
				n += *start
				var payload []byte
				if *body != "" {
					payload = []byte(fill(*body, n, w, rv))
				}
				t0 := time.Now()
				resp, err := client.Do(t.request(*method, fill(*url, n, w, rv), payload))
				if err != nil {
					mycodes["error"]++
					if myError == "" {
						myError = err.Error()
					}
					continue
				}
				var data []byte
				if *update || resp.StatusCode >= 300 {
					data, _ = io.ReadAll(resp.Body)
				} else {
					_, _ = io.Copy(io.Discard, resp.Body)
				}
				resp.Body.Close()
				mine = append(mine, float64(time.Since(t0).Microseconds())/1000)
				mycodes[strconv.Itoa(resp.StatusCode)]++
				if resp.StatusCode >= 300 && myError == "" {
					myError = fmt.Sprintf("%d %s", resp.StatusCode, truncate(data, 300))
				}
				if *update && resp.StatusCode < 300 {
					rv = firstRV(data)
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			for k, v := range mycodes {
				codes[k] += v
			}
			if firstError == "" {
				firstError = myError
			}
			mu.Unlock()
		}(int64(w))
	}
	wg.Wait()
	elapsed := time.Since(began).Seconds()
	sort.Float64s(lat)
	printJSON(map[string]any{"rps": float64(len(lat)) / elapsed, "n": len(lat),
		"seconds": elapsed, "p50_ms": percentile(lat, 0.5), "p90_ms": percentile(lat, 0.9),
		"p99_ms": percentile(lat, 0.99), "codes": codes, "first_error": firstError})
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
}

// -- watch -----------------------------------------------------------------------------------

var sentMarker = []byte(`bench.example.com/sent":"`)

// sentAt is the send time (Unix nanoseconds) an event's line carries, or -1.
func sentAt(line []byte) int64 {
	i := bytes.Index(line, sentMarker)
	if i < 0 {
		return -1
	}
	rest := line[i+len(sentMarker):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return -1
	}
	v, err := strconv.ParseInt(string(rest[:j]), 10, 64)
	if err != nil {
		return -1
	}
	return v
}

type watcherResult struct {
	events    int
	latencies []float64
	ended     bool // the server closed the stream before every event came
}

func watch(args []string) {
	fs := flag.NewFlagSet("watch", flag.ExitOnError)
	var t target
	t.register(fs)
	url := fs.String("url", "", "collection URL (watched, and written to)")
	body := fs.String("body", "", "create body template ({n}, {sent})")
	watchers := fs.Int("watchers", 1000, "watches held open")
	rate := fs.Float64("rate", 100, "creates per second")
	dur := fs.Duration("d", 10*time.Second, "how long the creates go on")
	settle := fs.Duration("settle", 30*time.Second, "longest wait for delivery after the last write")
	writers := fs.Int("writers", 8, "connections the creates go out on")
	opening := fs.Int("opening", 64, "watches opened at a time")
	pid := fs.Int("pid", 0, "the server's process: its CPU time from the first write to the last delivery is reported")
	_ = fs.Parse(args)
	if *url == "" || *body == "" {
		die(fmt.Errorf("watch: -url and -body are required"))
	}
	setup := t.client(time.Minute)
	resp, err := setup.Do(t.request("GET", *url+"?limit=1", nil))
	die(err)
	listed, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		die(fmt.Errorf("list %s: %d %s", *url, resp.StatusCode, truncate(listed, 300)))
	}
	from := firstRV(listed)
	expected := int(*rate * dur.Seconds())

	results := make([]watcherResult, *watchers)
	var opened, failed int64
	var openErr atomic.Value
	var ready, done sync.WaitGroup
	gate := make(chan struct{}, *opening)
	stop := make(chan struct{})
	for i := 0; i < *watchers; i++ {
		ready.Add(1)
		done.Add(1)
		go func(i int) {
			defer done.Done()
			gate <- struct{}{}
			client := t.client(0)
			resp, err := client.Do(t.request("GET", fmt.Sprintf(
				"%s?watch=1&resourceVersion=%s&timeoutSeconds=1800", *url, from), nil))
			<-gate
			if err != nil || resp.StatusCode != 200 {
				atomic.AddInt64(&failed, 1)
				if err != nil {
					openErr.Store(err.Error())
				} else {
					openErr.Store(resp.Status)
				}
				ready.Done()
				return
			}
			atomic.AddInt64(&opened, 1)
			ready.Done()
			go func() { <-stop; resp.Body.Close() }()
			rd := bufio.NewReaderSize(resp.Body, 1<<16)
			r := &results[i]
			r.latencies = make([]float64, 0, expected)
			for r.events < expected {
				line, err := rd.ReadBytes('\n')
				if sent := sentAt(line); sent > 0 {
					r.latencies = append(r.latencies, float64(time.Now().UnixNano()-sent)/1e6)
					r.events++
				}
				if err != nil {
					r.ended = r.events < expected
					break
				}
			}
			resp.Body.Close()
		}(i)
	}
	ready.Wait()
	if opened == 0 {
		die(fmt.Errorf("watch: no watch opened: %v", openErr.Load()))
	}

	// paced creates: request k is due at start + k/rate, on the next free writer connection
	due := make(chan int, expected)
	var wmu sync.Mutex
	wcodes := map[string]int{}
	var wg sync.WaitGroup
	for w := 0; w < *writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := t.client(time.Minute)
			for k := range due {
				payload := strings.NewReplacer("{n}", strconv.Itoa(k),
					"{sent}", strconv.FormatInt(time.Now().UnixNano(), 10)).Replace(*body)
				code := "error"
				resp, err := client.Do(t.request("POST", *url, []byte(payload)))
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = strconv.Itoa(resp.StatusCode)
				}
				wmu.Lock()
				wcodes[code]++
				wmu.Unlock()
			}
		}()
	}
	cpuBefore := cpuSeconds(*pid)
	began := time.Now()
	for k := 0; k < expected; k++ {
		if d := time.Until(began.Add(time.Duration(float64(k) / *rate * float64(time.Second)))); d > 0 {
			time.Sleep(d)
		}
		due <- k
	}
	close(due)
	wg.Wait()
	writing := time.Since(began).Seconds()
	finished := make(chan struct{})
	go func() { done.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(*settle):
	}
	serverCPU := cpuSeconds(*pid) - cpuBefore
	delivering := time.Since(began).Seconds()
	close(stop)
	<-finished

	var all []float64
	complete, ended, events := 0, 0, 0
	for _, r := range results {
		all = append(all, r.latencies...)
		events += r.events
		if r.events == expected {
			complete++
		}
		if r.ended {
			ended++
		}
	}
	sort.Float64s(all)
	maxLatency := 0.0
	if len(all) > 0 {
		maxLatency = all[len(all)-1]
	}
	printJSON(map[string]any{"watchers": *watchers, "opened": opened, "failed": failed,
		"expected_per_watcher": expected, "complete": complete, "ended_early": ended,
		"events": events, "expected_events": expected * int(opened),
		"write_seconds": writing, "write_codes": wcodes, "server_cpu_s": serverCPU,
		"delivery_seconds": delivering, "p50_ms": percentile(all, 0.5),
		"p99_ms": percentile(all, 0.99), "max_ms": maxLatency})
}

// cpuSeconds is the user and system time of process pid (0: none) from /proc, in seconds
// (its clock ticks are USER_HZ, 100 a second on Linux).
func cpuSeconds(pid int) float64 {
	if pid == 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100
}

// -- serve -----------------------------------------------------------------------------------

func serve(args []string) {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address")
	cert := fs.String("cert", "", "serving certificate")
	key := fs.String("key", "", "serving key")
	clientCA := fs.String("client-ca", "", "CA of the client certificates required")
	_ = fs.Parse(args)
	pair, err := tls.LoadX509KeyPair(*cert, *key)
	die(err)
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}}
	if *clientCA != "" {
		pem, err := os.ReadFile(*clientCA)
		die(err)
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	note := strings.Repeat("x", 800)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		switch {
		case len(parts) == 3 && parts[0] == "apis":
			fmt.Fprintf(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"%s/%s",`+
				`"resources":[{"name":"things","singularName":"thing","namespaced":true,`+
				`"kind":"Thing","verbs":["get","list"]}]}`, parts[1], parts[2])
		case len(parts) == 7 && parts[0] == "apis" && parts[3] == "namespaces":
			fmt.Fprintf(w, `{"apiVersion":"%s/%s","kind":"Thing","metadata":{"name":"%s",`+
				`"namespace":"%s","resourceVersion":"1","annotations":{"note":"%s"}}}`,
				parts[1], parts[2], parts[6], parts[4], note)
		case r.URL.Path == "/healthz" || r.URL.Path == "/readyz":
			_, _ = w.Write([]byte("ok"))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":404}`))
		}
	})
	server := &http.Server{Addr: *listen, Handler: handler, TLSConfig: cfg,
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}}
	die(server.ListenAndServeTLS("", ""))
}

func main() {
	if len(os.Args) < 2 {
		die(fmt.Errorf("usage: gobench load|watch|serve [flags]"))
	}
	switch os.Args[1] {
	case "load":
		load(os.Args[2:])
	case "watch":
		watch(os.Args[2:])
	case "serve":
		serve(os.Args[2:])
	default:
		die(fmt.Errorf("unknown command %q: load, watch or serve", os.Args[1]))
	}
}
