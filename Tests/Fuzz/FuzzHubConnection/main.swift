// libFuzzer target: the connection machine under arbitrary input sequences. Each input byte is
// an operation (start, stop, negotiate responses, transport events, server records, timers,
// app commands, late replies and stale upload streams). Invariants: no crash; no bytes after
// `closed`, none on a stale transport; every blocking invocation and every stream the app
// started ends exactly once (a completion, or the stream's end), by the end of a stop at the
// latest; no timer at or before the present once due timers have run; the stateful-reconnect
// buffer within its limit plus one message; a bounded number of actions per input (no busy loop).
import FuzzSupport
import TetherCore
import TetherSignalR

let records: [[UInt8]] = [
    "{}\u{1E}", #"{"type":6}"# + "\u{1E}", #"{"type":3,"invocationId":"0","result":1}"# + "\u{1E}",
    #"{"type":2,"invocationId":"1","item":1}"# + "\u{1E}", #"{"type":3,"invocationId":"1"}"# + "\u{1E}",
    #"{"type":1,"invocationId":"s","target":"Notify","arguments":[]}"# + "\u{1E}",
    #"{"type":7,"allowReconnect":true}"# + "\u{1E}", #"{"type":8,"sequenceId":1}"# + "\u{1E}",
    #"{"type":9,"sequenceId":1}"# + "\u{1E}", #"{"error":"no"}"# + "\u{1E}", "garbage",
].map { Array($0.utf8) }

let negotiate = Array(
    #"{"negotiateVersion":1,"connectionId":"c","connectionToken":"t","useStatefulReconnect":true,"availableTransports":[{"transport":"WebSockets","transferFormats":["Text"]}]}"#
        .utf8
)

@c(LLVMFuzzerTestOneInput)
func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    // Small enough that a few messages fill it, so that back-pressure is exercised.
    let bufferSize = 40 + Int(bytes[0] >> 2) * 8
    // Every message the commands below make is far shorter (messages buffered while resuming are
    // not seen in a send action until replayed, so the bound is fixed rather than observed).
    let largestMessage = 256
    var machine = HubConnectionMachine(
        configuration: .init(
            url: "http://h/hub",
            reconnectPolicy: bytes[0] & 1 == 0 ? .signalRDefault : nil,
            statefulReconnect: bytes[0] & 2 == 0,
            statefulReconnectBufferSize: bufferSize,
            handledTargets: ["Notify"]
        ),
        hubProtocol: .json(JSONHubProtocol()),
        randomSeed: 1
    )
    var now = Instant.zero
    var closed = false
    // The generation the driver would hold; a byte's high bit feeds input from a stale one.
    var generation = TransportGeneration(0)
    var pending: Set<String> = []
    var ended: Set<String> = []
    func drain() {
        var count = 0
        while let action = machine.pollAction() {
            count += 1
            require(count < 10_000, "more than 10,000 actions for one input")
            switch action {
            case .event(.lifecycle(.closed)): closed = true
            case .request(.fetchAccessToken(let next)), .request(.negotiate(_, _, let next)),
                .openTransport(_, let next):
                closed = false
                generation = next
            case .send(_, let on, _):
                require(!closed, "bytes sent after closed")
                require(on == machine.currentGeneration || on == generation, "bytes sent on a stale transport")
            case .event(.completion(let id, _)), .event(.streamCompleted(let id, _)):
                if pending.remove(id) != nil {
                    ended.insert(id)
                } else {
                    require(!ended.contains(id), "invocation \(id) ended twice")
                }
            default: break
            }
        }
        require(
            machine.unacknowledgedBytes < bufferSize + largestMessage,
            "stateful buffer over its limit: \(machine.unacknowledgedBytes) bytes"
        )
        if let due = machine.pollTimeout(), due <= now {
            machine.handleTimeout(now: now)
            drain()
            if let next = machine.pollTimeout() { require(next > now, "a timer at or before the present") }
        }
    }
    for byte in bytes.dropFirst() {
        let input = byte & 0x80 == 0 ? generation : TransportGeneration(generation.value &- 1)
        switch byte % 20 {
        case 0: if machine.stateName == .disconnected { machine.start(now: now) }
        case 1: machine.stop(now: now)
        case 2: machine.negotiateResponse(status: 200, body: negotiate, generation: input, now: now)
        case 3: machine.negotiateResponse(status: Int(byte), body: [], generation: input, now: now)
        case 4: machine.transportConnected(generation: input, now: now)
        case 5:
            let error = byte & 16 == 0 ? nil : TransportError(byte & 32 == 0 ? .connectionLost : .unauthorized, "reset")
            machine.transportClosed(generation: input, error: error, now: now)
        case 6, 7, 8:
            let record = records[Int(byte / 16) % records.count]
            machine.transportReceived(record.backDeployedSpan, generation: input, now: now)
        case 9: if let id = try? machine.invoke("Echo", arguments: .empty(.json), now: now) { pending.insert(id) }
        case 10: if let id = try? machine.stream("Feed", arguments: .empty(.json), now: now) { pending.insert(id) }
        case 11: try? machine.cancelStream("1", now: now)  // a stream ends with streamCompleted; others: no-op
        case 12: try? machine.send("Log", arguments: .empty(.json), now: now)
        case 13: try? machine.reply(to: "s", result: .void, now: now)
        case 14:
            // An upload stream: a fresh one, or a stale id (completed, or from before a reconnect).
            let id = byte & 32 == 0 ? (try? machine.makeUploadStream(now: now)) : String(byte / 64)
            if let id {
                try? machine.sendStreamItem(id, item: .null(.json), now: now)
                if byte & 64 == 0 { try? machine.completeUploadStream(id, now: now) }
            }
        default:
            now = now + .seconds(Int64(byte / 16) * 3)
            machine.handleTimeout(now: now)
        }
        drain()
    }
    machine.stop(now: now)
    drain()
    for _ in 0..<4 {
        now = now + .seconds(30)
        machine.handleTimeout(now: now)
        drain()
    }
    require(pending.isEmpty, "invocations never ended: \(pending.sorted())")
    return 0
}
