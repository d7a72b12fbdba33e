import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `tether-bench --echo-floor URL`: the floor under every SignalR client's Echo latency: the
/// simplest client that can talk to the hub, on blocking sockets. It negotiates, opens the
/// WebSocket, does the handshake, then for each call writes one prebuilt masked frame and reads
/// until the completion's bytes appear (a byte search, no parsing). What Tether takes above this
/// is its own overhead over the hub. Prints one JSON line like `--echo-latency`.
enum EchoFloor {
    static func run(url: String, count: Int, warmUp: Int = 50) throws -> String {
        guard url.hasPrefix("http://"), let slash = url.dropFirst(7).firstIndex(of: "/") else {
            throw BenchError("--echo-floor takes an http:// URL with a path")
        }
        let authority = String(url.dropFirst(7)[..<slash])
        let path = String(url[slash...])
        guard let colon = authority.lastIndex(of: ":"), let port = UInt16(authority[authority.index(after: colon)...])
        else { throw BenchError("--echo-floor needs HOST:PORT") }
        let host = String(authority[..<colon])

        // Negotiate: one request, read to the end.
        let negotiate = try Socket(host: host, port: port)
        try negotiate.write(
            "POST \(path)/negotiate?negotiateVersion=1 HTTP/1.1\r\nHost: \(authority)\r\nContent-Length: 0\r\n"
                + "Connection: close\r\n\r\n"
        )
        let answer = String(decoding: try negotiate.readToEnd(), as: UTF8.self)
        guard let name = answer.range(of: #""connectionToken""#)?.upperBound,
            let colon = answer[name...].firstIndex(of: ":"),
            let quote = answer[answer.index(after: colon)...].firstIndex(of: "\""),
            case let tokenStart = answer.index(after: quote),
            let tokenEnd = answer[tokenStart...].firstIndex(of: "\"")
        else { throw BenchError("no connection token in the negotiate response") }
        let token = answer[tokenStart..<tokenEnd]

        let socket = try Socket(host: host, port: port)
        try socket.write(
            "GET \(path)?id=\(token) HTTP/1.1\r\nHost: \(authority)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        var received: [UInt8] = []
        try socket.read(until: Array("\r\n\r\n".utf8), into: &received)
        received.removeAll()
        try socket.write(frame(Array("{\"protocol\":\"json\",\"version\":1}\u{1E}".utf8)))
        try socket.read(until: Array("{}\u{1E}".utf8), into: &received)

        let call = frame(Array(#"{"type":1,"invocationId":"1","target":"Echo","arguments":["echo"]}"#.utf8) + [0x1E])
        // Only the completion carries the argument back (pings and the handshake do not).
        let completion = Array(#""echo""#.utf8)
        var samples: [Double] = []
        samples.reserveCapacity(count)
        for index in 0..<(warmUp + count) {
            received.removeAll(keepingCapacity: true)
            let start = DispatchTime.now().uptimeNanoseconds
            try socket.write(call)
            try socket.read(until: completion, into: &received)
            if index >= warmUp { samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1000) }
        }
        samples.sort()
        func percentile(_ p: Double) -> Double { samples[min(samples.count - 1, Int(p * Double(samples.count)))] }
        return String(
            format: #"{"client":"floor","transport":"websockets","count":%d,"p50_us":%.1f,"p99_us":%.1f}"#,
            count,
            percentile(0.5),
            percentile(0.99)
        )
    }

    /// A masked text frame (the mask is zero: XOR with it changes nothing, and the hub must
    /// accept any mask).
    static func frame(_ payload: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = [0x81]
        if payload.count < 126 {
            bytes.append(0x80 | UInt8(payload.count))
        } else {
            bytes += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        }
        return bytes + [0, 0, 0, 0] + payload
    }

    /// A blocking TCP socket with `TCP_NODELAY`.
    final class Socket {
        let fd: Int32

        init(host: String, port: UInt16) throws {
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw BenchError("socket() failed") }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else { throw BenchError("not an IPv4 address") }
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard connected == 0 else { throw BenchError("connect() failed") }
        }

        deinit { close(fd) }

        func write(_ text: String) throws { try write(Array(text.utf8)) }

        func write(_ bytes: [UInt8]) throws {
            var offset = 0
            while offset < bytes.count {
                let written = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, bytes.count - offset, 0) }
                guard written > 0 else { throw BenchError("send() failed") }
                offset += written
            }
        }

        /// Reads until `pattern` appears in `buffer` (which keeps what was read).
        func read(until pattern: [UInt8], into buffer: inout [UInt8]) throws {
            var chunk = [UInt8](repeating: 0, count: 4096)
            var searchFrom = 0
            while true {
                if buffer.count >= pattern.count {
                    let last = buffer.count - pattern.count
                    if searchFrom <= last {
                        for start in searchFrom...last where buffer[start] == pattern[0] {
                            if buffer[start..<(start + pattern.count)].elementsEqual(pattern) { return }
                        }
                        searchFrom = last + 1
                    }
                }
                let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { throw BenchError("the hub closed the connection") }
                buffer += chunk[..<count]
            }
        }

        func readToEnd() throws -> [UInt8] {
            var all: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { return all }
                all += chunk[..<count]
            }
        }
    }
}
