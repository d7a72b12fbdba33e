// libFuzzer target: the WebSocket client's input side. The first byte picks the split of the
// stream and whether the opening handshake's response is taken from the input too (else a valid
// 101 response comes first and the rest is frames). Invariants: any split of the stream gives
// the same events and the same error; no message exceeds the configured limit; once closed,
// the client neither emits events nor writes bytes.
import FuzzSupport
import TetherHTTP

struct Outcome: Equatable {
    var events: [WebSocketClient.Event] = []
    var error: WebSocketError?
    var output: [UInt8] = []
}

let configuration = WebSocketClient.Configuration(maximumFrameSize: 1024, maximumMessageSize: 2048)

func run(_ pieces: [ArraySlice<UInt8>]) -> Outcome {
    var client = WebSocketClient(host: "example.com", target: "/hub", configuration: configuration, random: { 42 })
    var outcome = Outcome()
    _ = client.openingHandshake()
    for piece in pieces {
        let wasClosed = client.state == .closed
        client.receive(piece)
        do {
            while let event = try client.nextEvent() {
                require(!wasClosed, "an event after closed")
                if case .message(.text(let bytes)) = event {
                    require(bytes.count <= configuration.maximumMessageSize, "a message over the limit")
                }
                if case .message(.binary(let bytes)) = event {
                    require(bytes.count <= configuration.maximumMessageSize, "a message over the limit")
                }
                outcome.events.append(event)
            }
        } catch {
            outcome.error = error
            outcome.output += client.takeOutput()
            return outcome
        }
        let output = client.takeOutput()
        require(!wasClosed || output.isEmpty, "bytes written after closed")
        outcome.output += output
    }
    return outcome
}

@c(LLVMFuzzerTestOneInput)
func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let selector = input.byte()
    var stream: [UInt8] = []
    if selector & 0x80 == 0 {
        let accept = WebSocketClient.acceptValue(for: key)
        stream = Array(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(accept)\r\n\r\n"
                .utf8
        )
    }
    stream += input.rest()
    let whole = run([stream[...]])
    let split = run(chunks(of: stream, seed: selector))
    require(whole == split, "a split of the stream gave other events (seed \(selector))")
    return 0
}

/// The key the client sends with `random` always 42 (two words of it, little-endian, base64).
let key: String = {
    var client = WebSocketClient(host: "example.com", target: "/hub", configuration: configuration, random: { 42 })
    let request = String(decoding: client.openingHandshake(), as: UTF8.self)
    let field = "Sec-WebSocket-Key: "
    let line = request.split(separator: "\r\n").first { $0.hasPrefix(field) }!
    return String(line.dropFirst(field.count))
}()
