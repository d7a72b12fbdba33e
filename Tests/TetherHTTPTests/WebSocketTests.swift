import Testing
import TetherCore
import TetherTestSupport

@testable import TetherHTTP

func hex(_ bytes: [UInt8]) -> String {
    bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
}

struct SHA1Tests {
    @Test func fipsVectors() {
        #expect(hex(SHA1.digest([])) == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
        #expect(hex(SHA1.digest(Array("abc".utf8))) == "a9993e364706816aba3e25717850c26c9cd0d89d")
        #expect(
            hex(SHA1.digest(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
                == "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
        )
        #expect(hex(SHA1.digest([UInt8](repeating: 0x61, count: 1000))) == "291e9a6c66994949b57ba5e650361e98fc36b1ba")
    }

    /// RFC 6455 §1.3's example.
    @Test func acceptValue() {
        #expect(WebSocketClient.acceptValue(for: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }
}

struct FrameTests {
    /// RFC 6455 §5.7's examples, decoded from the server side (unmasked) at every split.
    @Test(
        arguments: [
            (
                [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f],
                [WebSocketFrame(opcode: .text, payload: Array("Hello".utf8))]
            ),
            (
                [0x01, 0x03, 0x48, 0x65, 0x6c, 0x80, 0x02, 0x6c, 0x6f],
                [
                    WebSocketFrame(isFinal: false, opcode: .text, payload: Array("Hel".utf8)),
                    WebSocketFrame(opcode: .continuation, payload: Array("lo".utf8)),
                ]
            ),
            (
                [0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f],
                [WebSocketFrame(opcode: .ping, payload: Array("Hello".utf8))]
            ),
            (
                [0x82, 0x7E, 0x01, 0x00] + [UInt8](repeating: 7, count: 256),
                [WebSocketFrame(opcode: .binary, payload: [UInt8](repeating: 7, count: 256))]
            ),
            (
                [0x82, 0x7F, 0, 0, 0, 0, 0, 1, 0, 0] + [UInt8](repeating: 9, count: 65536),
                [WebSocketFrame(opcode: .binary, payload: [UInt8](repeating: 9, count: 65536))]
            ),
        ] as [([UInt8], [WebSocketFrame])]
    )
    func decodesRFCExamples(_ bytes: [UInt8], _ expected: [WebSocketFrame]) throws {
        for chunk in [bytes.count, 1, 3, 100] {
            var decoder = WebSocketFrameDecoder(maximumFrameSize: 1 << 20)
            var frames: [WebSocketFrame] = []
            var offset = 0
            while offset < bytes.count {
                let end = min(offset + chunk, bytes.count)
                decoder.append(bytes.backDeployedSpan.extracting(offset..<end))
                offset = end
                while let frame = try decoder.next() { frames.append(frame) }
            }
            #expect(frames == expected, "chunk \(chunk)")
            #expect(!decoder.hasPartialFrame)
        }
    }

    /// Reads that always end inside a frame: the buffer stays bounded by about two frames.
    @Test func bufferStaysBoundedWhenReadsEndInsideFrames() throws {
        var decoder = WebSocketFrameDecoder(maximumFrameSize: 1 << 20)
        let frame: [UInt8] = [0x82, 0x7E, 0x03, 0xE8] + [UInt8](repeating: 1, count: 1000)
        let stream = [[UInt8]](repeating: frame, count: 2000).flatMap { $0 }
        var offset = 0
        var frames = 0
        var largest = 0
        while offset < stream.count {
            let end = min(offset + 777, stream.count)
            decoder.append(stream.backDeployedSpan.extracting(offset..<end))
            offset = end
            while try decoder.next() != nil { frames += 1 }
            largest = max(largest, decoder.bufferedByteCount)
        }
        #expect(frames == 2000)
        #expect(largest < 16 * 1024)
    }

    /// RFC 6455 §5.7: "Hello" masked with 0x37fa213d.
    @Test func encodesMasked() {
        var bytes: [UInt8] = []
        WebSocketFrame(opcode: .text, payload: Array("Hello".utf8)).write(maskedWith: 0x37FA_213D, into: &bytes)
        #expect(bytes == [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58])
        var long: [UInt8] = []
        WebSocketFrame(opcode: .binary, payload: [UInt8](repeating: 0, count: 70000)).write(maskedWith: 0, into: &long)
        #expect(Array(long.prefix(10)) == [0x82, 0xFF, 0, 0, 0, 0, 0, 1, 0x11, 0x70])
    }

    @Test(
        arguments: [
            ([0xC1, 0x00], 1002), ([0x83, 0x00], 1002), ([0x81, 0x85, 1, 2, 3, 4, 0, 0, 0, 0, 0], 1002),
            ([0x09, 0x00], 1002), ([0x89, 0x7E, 0x00, 0x7E], 1002), ([0x82, 0x7E, 0x00, 0x10], 1002),
            ([0x82, 0x7F, 0x80, 0, 0, 0, 0, 0, 0, 0], 1002), ([0x82, 0x7F, 0, 0, 0, 0, 0, 2, 0, 0], 1009),
        ] as [([UInt8], Int)]
    )
    func rejectsBadFrames(_ bytes: [UInt8], _ code: Int) {
        var decoder = WebSocketFrameDecoder(maximumFrameSize: 65536)
        decoder.append(bytes.backDeployedSpan)
        expectThrows(\WebSocketError.code, UInt16(code)) { _ = try decoder.next() }
        // The error stays: a second call throws it again.
        expectThrows(\WebSocketError.code, UInt16(code)) { _ = try decoder.next() }
    }
}

/// A scripted server for `WebSocketClient`: the handshake answer and unmasked frames.
struct ScriptedWebSocketServer {
    static func accept(_ request: [UInt8], extraHeaders: String = "") -> [UInt8] {
        let text = String(decoding: request, as: UTF8.self)
        let key = text.split(separator: "\r\n").first { $0.hasPrefix("Sec-WebSocket-Key: ") }!.dropFirst(19)
        return Array(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(WebSocketClient.acceptValue(for: String(key)))\r\n\(extraHeaders)\r\n"
                .utf8
        )
    }

    static func frame(_ opcode: UInt8, _ payload: [UInt8], final: Bool = true) -> [UInt8] {
        precondition(payload.count < 126)
        return [(final ? 0x80 : 0) | opcode, UInt8(payload.count)] + payload
    }

    /// Unmasks what the client sent (the frames' opcodes and payloads).
    static func clientFrames(_ bytes: [UInt8]) -> [(opcode: UInt8, payload: [UInt8])] {
        var frames: [(UInt8, [UInt8])] = []
        var index = 0
        while index < bytes.count {
            let opcode = bytes[index] & 0x0F
            #expect(bytes[index + 1] & 0x80 != 0, "client frames are masked")
            var length = Int(bytes[index + 1] & 0x7F)
            index += 2
            if length == 126 {
                length = Int(bytes[index]) << 8 | Int(bytes[index + 1])
                index += 2
            } else if length == 127 {
                length = 0
                for _ in 0..<8 {
                    length = length << 8 | Int(bytes[index])
                    index += 1
                }
            }
            let mask = Array(bytes[index..<(index + 4)])
            index += 4
            frames.append((opcode, (0..<length).map { bytes[index + $0] ^ mask[$0 & 3] }))
            index += length
        }
        return frames
    }
}

struct WebSocketClientTests {
    static func openClient(_ configuration: WebSocketClient.Configuration = .init()) throws -> WebSocketClient {
        var seed = SeededRandomNumberGenerator(seed: 5)
        let first = seed.next()
        var client = WebSocketClient(
            host: "127.0.0.1:5099",
            target: "/hub?id=abc",
            headers: ["Authorization": "Bearer token"],
            configuration: configuration,
            random: { first }
        )
        let request = client.openingHandshake()
        let text = String(decoding: request, as: UTF8.self)
        #expect(text.hasPrefix("GET /hub?id=abc HTTP/1.1\r\nHost: 127.0.0.1:5099\r\n"))
        #expect(text.contains("\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"))
        #expect(
            text.contains("\r\nSec-WebSocket-Version: 13\r\n") && text.contains("\r\nAuthorization: Bearer token\r\n")
        )
        #expect(text.hasSuffix("\r\n\r\n"))
        client.receive(ScriptedWebSocketServer.accept(request))
        #expect(try client.nextEvent() == .opened)
        #expect(client.state == .open)
        return client
    }

    /// A whole server stream, fed at every split, gives the same events.
    @Test func eventsAtEverySplit() throws {
        var reference: [WebSocketClient.Event]?
        let stream: [UInt8] =
            ScriptedWebSocketServer.frame(0x1, Array("{\"type\":6}\u{1E}".utf8))
            + ScriptedWebSocketServer.frame(0x2, [1, 2, 3], final: false) + ScriptedWebSocketServer.frame(0x9, [7])
            + ScriptedWebSocketServer.frame(0x0, [4], final: true) + ScriptedWebSocketServer.frame(0xA, [8])
            + ScriptedWebSocketServer.frame(0x1, Array("é".utf8))
        for chunk in [stream.count, 1, 2, 5] {
            var client = try Self.openClient()
            var events: [WebSocketClient.Event] = []
            var offset = 0
            while offset < stream.count {
                let end = min(offset + chunk, stream.count)
                client.receive(Array(stream[offset..<end]))
                offset = end
                while let event = try client.nextEvent() { events.append(event) }
            }
            #expect(
                events == [
                    .message(.text(Array("{\"type\":6}\u{1E}".utf8))), .message(.binary([1, 2, 3, 4])), .pong([8]),
                    .message(.text(Array("é".utf8))),
                ]
            )
            // The ping between two fragments was answered with a pong.
            let sent = ScriptedWebSocketServer.clientFrames(client.takeOutput())
            #expect(sent.count == 1 && sent[0].opcode == 0xA && sent[0].payload == [7])
            if reference == nil { reference = events }
        }
    }

    @Test func sendsMaskedMessages() throws {
        var client = try Self.openClient()
        client.send(.text(Array("{\"type\":1}\u{1E}".utf8)))
        client.send(.binary([UInt8](repeating: 1, count: 300)))
        let frames = ScriptedWebSocketServer.clientFrames(client.takeOutput())
        #expect(frames.map(\.opcode) == [0x1, 0x2])
        #expect(frames[0].payload == Array("{\"type\":1}\u{1E}".utf8))
        #expect(frames[1].payload == [UInt8](repeating: 1, count: 300))
    }

    @Test func closingHandshakeFromTheClient() throws {
        var client = try Self.openClient()
        client.close(code: 1000, reason: "bye")
        #expect(client.state == .closing)
        let frames = ScriptedWebSocketServer.clientFrames(client.takeOutput())
        #expect(frames.first?.opcode == 0x8 && frames.first?.payload == [0x03, 0xE8] + Array("bye".utf8))
        // A message still in flight is delivered, then the server's close ends it.
        client.receive(
            ScriptedWebSocketServer.frame(0x1, Array("late".utf8)) + ScriptedWebSocketServer.frame(0x8, [0x03, 0xE8])
        )
        #expect(try client.nextEvent() == .message(.text(Array("late".utf8))))
        #expect(try client.nextEvent() == .closed(code: 1000, reason: ""))
        #expect(client.state == .closed)
        #expect(client.takeOutput().isEmpty)
    }

    @Test func closingHandshakeFromTheServer() throws {
        var client = try Self.openClient()
        client.receive(ScriptedWebSocketServer.frame(0x8, [0x03, 0xE9] + Array("going".utf8)))
        #expect(try client.nextEvent() == .closed(code: 1001, reason: "going"))
        let frames = ScriptedWebSocketServer.clientFrames(client.takeOutput())
        #expect(frames.count == 1 && frames[0].opcode == 0x8 && frames[0].payload == [0x03, 0xE9])
        var empty = try Self.openClient()
        empty.receive(ScriptedWebSocketServer.frame(0x8, []))
        #expect(try empty.nextEvent() == .closed(code: nil, reason: ""))
    }

    @Test(
        arguments: [
            (ScriptedWebSocketServer.frame(0x1, [0xFF]), UInt16(1007)),
            (ScriptedWebSocketServer.frame(0x0, [1]), 1002),
            (ScriptedWebSocketServer.frame(0x1, [1], final: false) + ScriptedWebSocketServer.frame(0x2, [2]), 1002),
            (ScriptedWebSocketServer.frame(0x8, [3]), 1002),
            (ScriptedWebSocketServer.frame(0x8, [0x03, 0xED]), 1002),
            (ScriptedWebSocketServer.frame(0x8, [0x03, 0xE8, 0xFF]), 1007),
            ([0x82, 0x7E, 0x01, 0x00] + [UInt8](repeating: 0, count: 256), 1009),
            (
                ScriptedWebSocketServer.frame(0x2, [UInt8](repeating: 0, count: 100), final: false)
                    + ScriptedWebSocketServer.frame(0x0, [UInt8](repeating: 0, count: 100)),
                1009
            ),
        ] as [([UInt8], UInt16)]
    )
    func protocolErrorsCloseWithTheirCode(_ bytes: [UInt8], _ code: UInt16) throws {
        var client = try Self.openClient(.init(maximumFrameSize: 200, maximumMessageSize: 150))
        client.receive(bytes)
        do {
            while try client.nextEvent() != nil {}
            Issue.record("no error")
        } catch {
            #expect(error.code == code, "\(error)")
        }
        #expect(client.state == .closed)
        let frames = ScriptedWebSocketServer.clientFrames(client.takeOutput())
        #expect(frames.last?.opcode == 0x8)
        #expect(frames.last.map { UInt16($0.payload[0]) << 8 | UInt16($0.payload[1]) } == code)
        // The error stays: every later call throws it again.
        expectThrows(\WebSocketError.code, code) { _ = try client.nextEvent() }
    }

    @Test(arguments: [
        "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nNot found",
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: wrong=\r\n\r\n",
        "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "garbage\r\n\r\n",
    ])
    func handshakeFailures(_ response: String) throws {
        var client = WebSocketClient(host: "h", target: "/")
        _ = client.openingHandshake()
        client.receive(Array(response.utf8))
        expectThrows(\WebSocketError.code, 0) { _ = try client.nextEvent() }
        #expect(client.state == .closed)
        if response.hasPrefix("HTTP/1.1 404") {
            #expect(client.handshakeResponse?.status == 404)
        }
    }

    @Test func bytesAfterTheHandshakeAreFrames() throws {
        var client = WebSocketClient(host: "h", target: "/")
        let request = client.openingHandshake()
        client.receive(
            ScriptedWebSocketServer.accept(request) + ScriptedWebSocketServer.frame(0x1, Array("{}\u{1E}".utf8))
        )
        #expect(try client.nextEvent() == .opened)
        #expect(try client.nextEvent() == .message(.text(Array("{}\u{1E}".utf8))))
    }
}

struct HTTPResponseParserTests {
    static func parseAllWays(_ text: String, method: String = "GET") throws -> (HTTPResponse, [UInt8]) {
        let bytes = Array(text.utf8)
        var results: [(HTTPResponse, [UInt8])] = []
        for chunk in [bytes.count, 1, 2, 7] {
            var parser = HTTPResponseParser(requestMethod: method)
            var response: HTTPResponse?
            var offset = 0
            while offset < bytes.count, response == nil {
                let end = min(offset + chunk, bytes.count)
                parser.append(Array(bytes[offset..<end]))
                offset = end
                response = try parser.response()
            }
            if response == nil { response = try parser.endOfInput() }
            results.append((response!, parser.remainder + Array(bytes[offset...])))
        }
        for result in results.dropFirst() {
            #expect(result.0 == results[0].0)
            #expect(result.1 == results[0].1)
        }
        return results[0]
    }

    @Test func contentLengthChunkedAndUntilClose() throws {
        let (fixed, rest) = try Self.parseAllWays(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}EXTRA"
        )
        #expect(fixed.head.status == 200 && fixed.head.reason == "OK")
        #expect(fixed.head.headers["content-type"] == "application/json")
        #expect(fixed.body == Array("{\"a\":1}".utf8) && rest == Array("EXTRA".utf8))
        let (chunked, _) = try Self.parseAllWays(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nTrailer: x\r\n\r\n"
        )
        #expect(chunked.body == Array("Wikipedia".utf8))
        let (untilClose, _) = try Self.parseAllWays("HTTP/1.0 200 OK\nServer: old\n\nbody to the end")
        #expect(untilClose.body == Array("body to the end".utf8))
        let (upgrade, after) = try Self.parseAllWays(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\u{81}\u{00}"
        )
        #expect(upgrade.head.status == 101 && upgrade.body.isEmpty && after == [0xC2, 0x81, 0x00])
        let (noContent, _) = try Self.parseAllWays("HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n")
        #expect(noContent.body.isEmpty)
    }

    @Test(arguments: [
        "HTTP/2 200 OK\r\n\r\n", "HTTP/1.1 20 OK\r\n\r\n", "HTTP/1.1 200 OK\r\n folded\r\n\r\n",
        "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n",
    ])
    func malformed(_ text: String) {
        var parser = HTTPResponseParser()
        parser.append(Array(text.utf8))
        expectThrows(\HTTPError.kind, .malformed) { _ = try parser.response() }
    }

    @Test func limits() {
        var head = HTTPResponseParser(configuration: .init(maximumHeadSize: 64))
        head.append(Array(("HTTP/1.1 200 OK\r\nX: " + String(repeating: "a", count: 100)).utf8))
        #expect(throws: HTTPError(.tooLarge, "The response head is larger than 64 bytes.")) { _ = try head.response() }
        var body = HTTPResponseParser(configuration: .init(maximumBodySize: 4))
        body.append(Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n".utf8))
        expectThrows(\HTTPError.kind, .tooLarge) { _ = try body.response() }
        var chunks = HTTPResponseParser(configuration: .init(maximumBodySize: 4))
        chunks.append(Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\nabc\r\n".utf8))
        expectThrows(\HTTPError.kind, .tooLarge) { _ = try chunks.response() }
        var cut = HTTPResponseParser()
        cut.append(Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab".utf8))
        expectThrows(\HTTPError.kind, .incomplete) { _ = try cut.endOfInput() }
    }

    /// Streaming (an event stream, a long poll): the head once complete, the body handed over as
    /// it arrives, chunked framing removed, the same whatever the split; only untaken bytes count
    /// against the body limit.
    @Test func aStreamedBodyReadsTheSameSplitAtEveryByte() throws {
        let response = Array(
            ("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                + "d\r\ndata: {}\u{1E}\r\n\r\n\r\n15\r\ndata: {\"type\":6}\u{1E}\r\n\r\n\r\n0\r\n\r\n").utf8
        )
        let body = Array("data: {}\u{1E}\r\n\r\ndata: {\"type\":6}\u{1E}\r\n\r\n".utf8)
        for cut in 0...response.count {
            var parser = HTTPResponseParser(configuration: .init(maximumBodySize: 34))
            var head: HTTPResponseHead?
            var received: [UInt8] = []
            for piece in [Array(response[..<cut]), Array(response[cut...])] {
                parser.append(piece)
                head = try parser.readHead() ?? head
                received += try parser.takeBody()
            }
            #expect(head?.status == 200 && head?.headers["content-type"] == "text/event-stream", "cut \(cut)")
            #expect(received == body, "cut \(cut)")
            #expect(parser.isComplete, "cut \(cut)")
        }
        // Taken a byte at a time, a body larger than the limit streams through; read whole, it
        // does not.
        var streamed = HTTPResponseParser(configuration: .init(maximumBodySize: 22))
        var received: [UInt8] = []
        for byte in response {
            streamed.append([byte])
            _ = try streamed.readHead()
            received += try streamed.takeBody()
        }
        #expect(received == body)
        var whole = HTTPResponseParser(configuration: .init(maximumBodySize: 22))
        whole.append(response)
        expectThrows(\HTTPError.kind, .tooLarge) { _ = try whole.response() }
    }

    @Test func requestSerialization() {
        let request = HTTPRequest(
            method: "POST",
            target: "/hub/negotiate?negotiateVersion=1",
            host: "127.0.0.1:5099",
            headers: ["Authorization": "Bearer t", "X-Requested-With": "XMLHttpRequest"]
        )
        #expect(
            String(decoding: request.serialize(), as: UTF8.self)
                == "POST /hub/negotiate?negotiateVersion=1 HTTP/1.1\r\nHost: 127.0.0.1:5099\r\nAuthorization: Bearer t\r\nX-Requested-With: XMLHttpRequest\r\nContent-Length: 0\r\n\r\n"
        )
    }
}
