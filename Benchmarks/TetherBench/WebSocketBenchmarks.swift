import Foundation
import TetherCore
import TetherHTTP

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// WebSocket benchmarks: frame decoding throughput (the corpus's SignalR JSON messages as the
/// Text frames a server sends), and messages per second echoed over loopback TCP without TLS
/// (the client codec over a socket, against a raw-TCP echo of the same payloads).
struct WebSocketBenchmarks {
    static let names = ["websocket-decode", "websocket-loopback-echo"]

    let corpus: SignalRCorpus
    let passes: Int

    /// A client in the open state (its handshake answered in memory), for decoding.
    static func openClient(maximumMessageSize: Int = 1 << 20) -> WebSocketClient {
        var client = WebSocketClient(
            host: "127.0.0.1",
            target: "/hub",
            configuration: .init(maximumFrameSize: maximumMessageSize, maximumMessageSize: maximumMessageSize),
            random: { 0x0123_4567_89AB_CDEF }
        )
        let request = String(decoding: client.openingHandshake(), as: UTF8.self)
        let keyLine = request.split(separator: "\r\n").first { $0.hasPrefix("Sec-WebSocket-Key: ") }!
        let key = String(keyLine.dropFirst("Sec-WebSocket-Key: ".count))
        let response =
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(WebSocketClient.acceptValue(for: key))\r\n\r\n"
        client.receive(Array(response.utf8))
        guard case .opened = try? client.nextEvent() else { fatalError("the in-memory handshake failed") }
        return client
    }

    /// Appends an unmasked frame, as a server writes it.
    static func appendServerFrame(opcode: UInt8, payload: ArraySlice<UInt8>, to bytes: inout [UInt8]) {
        bytes.append(0x80 | opcode)
        let count = payload.count
        if count < 126 {
            bytes.append(UInt8(count))
        } else if count <= 0xFFFF {
            bytes += [126, UInt8(count >> 8), UInt8(truncatingIfNeeded: count)]
        } else {
            bytes.append(127)
            for shift in stride(from: 56, through: 0, by: -8) {
                bytes.append(UInt8(truncatingIfNeeded: UInt64(count) >> UInt64(shift)))
            }
        }
        bytes += payload
    }

    func run(filter: (String) -> Bool, progress: (String) -> Void) throws -> [BenchmarkResult] {
        var results: [BenchmarkResult] = []
        if filter("websocket-decode") {
            progress("websocket-decode")
            results += try decode()
        }
        if filter("websocket-loopback-echo") {
            progress("websocket-loopback-echo")
            results += try loopbackEcho()
        }
        return results
    }

    // MARK: - Decoding

    private func decode() throws -> [BenchmarkResult] {
        // Each hub message (with its record separator) in a Text frame of its own.
        var frames: [UInt8] = []
        frames.reserveCapacity(corpus.json.count + corpus.messageCount * 4)
        var start = 0
        var messages = 0
        for index in corpus.json.indices where corpus.json[index] == 0x1E {
            Self.appendServerFrame(opcode: 0x1, payload: corpus.json[start...index], to: &frames)
            start = index + 1
            messages += 1
        }
        let chunk = 65536
        let stream = frames
        let decode: () throws -> Int = {
            var client = Self.openClient()
            var checksum = 0
            var offset = 0
            while offset < stream.count {
                let end = min(offset + chunk, stream.count)
                client.receive(stream[offset..<end].span)
                offset = end
                while let event = try client.nextEvent() {
                    if case .message(.text(let payload)) = event { checksum &+= payload.count }
                }
            }
            precondition(checksum == corpus.json.count, "frames lost")
            return checksum
        }
        let copy: () throws -> Int = {
            // The floor: the same stream copied chunk by chunk into a reused buffer.
            var buffer: [UInt8] = []
            buffer.reserveCapacity(chunk)
            var checksum = 0
            var offset = 0
            while offset < stream.count {
                let end = min(offset + chunk, stream.count)
                buffer.removeAll(keepingCapacity: true)
                buffer.append(contentsOf: stream[offset..<end])
                checksum &+= Int(buffer[buffer.count - 1])
                offset = end
            }
            return checksum
        }
        var results = try measureAlternating(
            [
                (
                    name: "websocket-decode (Text frames, UTF-8 checked)", bytes: stream.count, messages: messages,
                    body: decode
                ),
                (
                    name: "websocket-decode baseline: copying the stream", bytes: stream.count, messages: messages,
                    body: copy
                ),
            ],
            passes: passes
        )
        results[0].note = String(
            format: "%.2f× the copy's time; %.0f-byte messages on average",
            results[0].seconds / results[1].seconds,
            Double(corpus.json.count) / Double(messages)
        )
        return results
    }

    // MARK: - Loopback echo

    /// A thread that accepts one connection on 127.0.0.1 and echoes: raw bytes back, or each
    /// masked client frame back as an unmasked server frame.
    final class EchoServer: @unchecked Sendable {
        let port: Int
        private let listener: Int32

        init(websocket: Bool) throws {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = 0
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard fd >= 0, bound == 0, listen(fd, 1) == 0 else { throw BenchError("cannot listen on 127.0.0.1") }
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            port = Int(UInt16(bigEndian: address.sin_port))
            listener = fd
            Thread.detachNewThread { [self] in serve(websocket: websocket) }
        }

        private func serve(websocket: Bool) {
            let connection = accept(listener, nil, nil)
            close(listener)
            guard connection >= 0 else { return }
            setNoDelay(connection)
            var buffer = [UInt8](repeating: 0, count: 65536)
            var pending: [UInt8] = []
            var output: [UInt8] = []
            while true {
                let count = buffer.withUnsafeMutableBytes { read(connection, $0.baseAddress, $0.count) }
                if count <= 0 { break }
                guard websocket else {
                    writeAll(connection, buffer[0..<count])
                    continue
                }
                pending += buffer[0..<count]
                var offset = 0
                output.removeAll(keepingCapacity: true)
                while let frame = Self.clientFrame(in: pending, at: offset) {
                    var payload = Array(pending[frame.payload])
                    for index in payload.indices { payload[index] ^= frame.mask[index & 3] }
                    WebSocketBenchmarks.appendServerFrame(opcode: frame.opcode, payload: payload[...], to: &output)
                    offset = frame.payload.upperBound
                }
                pending.removeFirst(offset)
                writeAll(connection, output[...])
            }
            close(connection)
        }

        /// The masked client frame starting at `offset`, if it is complete.
        static func clientFrame(
            in bytes: [UInt8],
            at offset: Int
        ) -> (opcode: UInt8, mask: [UInt8], payload: Range<Int>)? {
            guard bytes.count - offset >= 2 else { return nil }
            var length = Int(bytes[offset + 1] & 0x7F)
            var header = 2
            if length == 126 {
                guard bytes.count - offset >= 4 else { return nil }
                length = Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
                header = 4
            } else if length == 127 {
                guard bytes.count - offset >= 10 else { return nil }
                length = (0..<8).reduce(0) { $0 << 8 | Int(bytes[offset + 2 + $1]) }
                header = 10
            }
            let start = offset + header + 4
            guard bytes.count >= start + length else { return nil }
            return (bytes[offset] & 0x0F, Array(bytes[(start - 4)..<start]), start..<(start + length))
        }
    }

    private func loopbackEcho() throws -> [BenchmarkResult] {
        let messageCount = 200_000
        let window = 32
        let payload =
            Array(
                #"{"type":1,"target":"ReciveSaasMessage","arguments":[{"id":42,"text":"hello from the benchmark"}]}"#
                    .utf8
            ) + [0x1E]
        let webSocketServer = try EchoServer(websocket: true)
        let rawServer = try EchoServer(websocket: false)
        let webSocketSocket = try connectLoopback(port: webSocketServer.port)
        let rawSocket = try connectLoopback(port: rawServer.port)
        defer {
            close(webSocketSocket)
            close(rawSocket)
        }
        var client = Self.openClient()
        var buffer = [UInt8](repeating: 0, count: 65536)
        let webSocket: () throws -> Int = {
            var received = 0
            var sent = 0
            while received < messageCount {
                let batch = min(window, messageCount - sent)
                for _ in 0..<batch { client.send(.text(payload)) }
                sent += batch
                writeAll(webSocketSocket, client.takeOutput()[...])
                var inBatch = 0
                while inBatch < batch {
                    let count = buffer.withUnsafeMutableBytes { read(webSocketSocket, $0.baseAddress, $0.count) }
                    guard count > 0 else { throw BenchError("the echo server closed") }
                    client.receive(buffer[0..<count].span)
                    while let event = try client.nextEvent() {
                        if case .message = event { inBatch += 1 }
                    }
                }
                received += inBatch
            }
            return received
        }
        let raw: () throws -> Int = {
            var received = 0
            var batchBytes: [UInt8] = []
            while received < messageCount {
                let batch = min(window, messageCount - received)
                batchBytes.removeAll(keepingCapacity: true)
                for _ in 0..<batch { batchBytes += payload }
                writeAll(rawSocket, batchBytes[...])
                var bytes = 0
                while bytes < batchBytes.count {
                    let count = buffer.withUnsafeMutableBytes { read(rawSocket, $0.baseAddress, $0.count) }
                    guard count > 0 else { throw BenchError("the echo server closed") }
                    bytes += count
                }
                received += batch
            }
            return received
        }
        var results = try measureAlternating(
            [
                (
                    name: "websocket-loopback-echo (\(payload.count)-byte Text messages, \(window) in flight)",
                    bytes: payload.count * messageCount, messages: messageCount, body: webSocket
                ),
                (
                    name: "websocket-loopback-echo baseline: raw TCP echo", bytes: payload.count * messageCount,
                    messages: messageCount, body: raw
                ),
            ],
            passes: passes
        )
        results[0].note = String(
            format: "%.0f%% of the raw TCP echo's rate (no TLS)",
            100 * results[0].messagesPerSecond / results[1].messagesPerSecond
        )
        return results
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}

func setNoDelay(_ fd: Int32) {
    var one: Int32 = 1
    setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
}

func writeAll(_ fd: Int32, _ bytes: ArraySlice<UInt8>) {
    var offset = bytes.startIndex
    while offset < bytes.endIndex {
        let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if written <= 0 { return }
        offset += written
    }
}

func connectLoopback(port: Int) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard fd >= 0, result == 0 else { throw BenchError("cannot connect to 127.0.0.1:\(port)") }
    setNoDelay(fd)
    return fd
}
