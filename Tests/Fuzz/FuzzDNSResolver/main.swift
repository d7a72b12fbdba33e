// libFuzzer target: the DNS resolver machine under operation sequences: queries started and
// canceled, datagrams from the right or a wrong server (a reply built from the query the machine
// sent, with fuzz-chosen flags, response code and answer bytes, or raw bytes), the TCP fallback's
// events, and time. The first byte picks the nameservers, tries and small limits.
// Invariants: every query that is not canceled is answered exactly once (by the time every
// deadline has passed at the latest), a canceled one never; an answer comes only after a try;
// a success has the query's ID and question; no more UDP tries per query than attempts ×
// nameservers; TCP is opened only after a truncated answer, sent on only once connected, and
// closed once; every action names a query that exists; at most 10,000 actions per input.
import FuzzSupport
import TetherCore
import TetherDNS

struct QueryModel {
    var question: DNSQuestion
    /// The last query message sent (its ID and question), over UDP or TCP.
    var message: [UInt8] = []
    var udpTries = 0
    var tcpOpen = false
    var tcpConnected = false
    var answered = false
    var canceled = false
}

struct Model {
    var queries: [Int: QueryModel] = [:]
    var actions = 0
    let maximumTries: Int

    mutating func drain(_ machine: inout DNSResolverMachine) {
        while let action = machine.pollAction() {
            actions += 1
            require(actions <= 10_000, "more than 10,000 actions for one input")
            switch action {
            case .sendUDP(let bytes, _, let handle):
                guard var query = live(handle, action) else { continue }
                require(!query.tcpOpen, "a UDP try while TCP is open")
                query.udpTries += 1
                require(query.udpTries <= maximumTries, "more UDP tries than attempts × nameservers")
                query.message = bytes
                queries[handle] = query
            case .openTCP(_, let handle):
                guard var query = live(handle, action) else { continue }
                require(!query.tcpOpen, "TCP opened twice")
                query.tcpOpen = true
                query.tcpConnected = false
                queries[handle] = query
            case .sendTCP(let bytes, let handle):
                guard var query = live(handle, action) else { continue }
                require(query.tcpOpen && query.tcpConnected, "sent on TCP before it connected")
                require(bytes.count >= 2 && Int(bytes[0]) << 8 | Int(bytes[1]) == bytes.count - 2, "a bad TCP length")
                query.message = Array(bytes.dropFirst(2))
                queries[handle] = query
            case .closeTCP(let handle):
                guard var query = queries[handle] else {
                    require(false, "closeTCP for an unknown query")
                    continue
                }
                require(query.tcpOpen, "closed a TCP connection that is not open")
                query.tcpOpen = false
                query.tcpConnected = false
                queries[handle] = query
            case .answered(let handle, let result):
                guard var query = queries[handle] else {
                    require(false, "an answer for an unknown query")
                    continue
                }
                require(!query.answered, "a query answered twice")
                require(!query.canceled, "a canceled query answered")
                require(!query.tcpOpen, "answered with its TCP connection open")
                query.answered = true
                if case .success(let response) = result {
                    require(query.message.count >= 12, "a success before any try")
                    let id = UInt16(query.message[0]) << 8 | UInt16(query.message[1])
                    require(response.id == id, "a success with another ID")
                    require(response.question?.type == query.question.type, "a success for another question")
                }
                queries[handle] = query
            }
        }
    }

    func live(_ handle: Int, _ action: DNSResolverMachine.Action) -> QueryModel? {
        guard let query = queries[handle] else {
            require(false, "\(action) for an unknown query")
            return nil
        }
        require(!query.answered && !query.canceled, "\(action) after the query ended")
        return query
    }

    func pick(_ selector: UInt8) -> Int {
        let handles = queries.keys.sorted()
        guard !handles.isEmpty, selector & 0x80 == 0 else { return Int(selector & 0x07) }
        return handles[Int(selector) % handles.count]
    }
}

let names = ["example.com", "_xmpp-client._tcp.example.com", "a.b", "x"]
let servers = [Endpoint(host: "10.0.0.1", port: 53), Endpoint(host: "10.0.0.2", port: 5353)]

/// A reply to `message`: its ID and question, the response bit, `flags` (truncation, the response
/// code) and `answers` answer records' worth of fuzz bytes.
func reply(to message: [UInt8], flags: UInt8, answers: UInt8, body: [UInt8]) -> [UInt8] {
    guard message.count >= 12 else { return body }
    // The question section ends 4 bytes after its name's terminating zero.
    var end = 12
    while end < message.count, message[end] != 0 { end += Int(message[end]) + 1 }
    end = min(message.count, end + 5)
    var bytes = Array(message[..<end])
    bytes[2] = 0x81 | (flags & 0x02)  // QR, RD, maybe TC
    bytes[3] = 0x80 | (flags >> 4 & 0x0F)  // RA, the response code
    bytes[6] = 0
    bytes[7] = answers & 0x07
    bytes[10] = 0
    bytes[11] = 0
    return bytes + body
}

@c(LLVMFuzzerTestOneInput)
func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let selector = input.byte()
    let configuration = DNSResolverMachine.Configuration(
        nameServers: Array(servers.prefix(1 + Int(selector & 1))),
        timeout: .seconds(2),
        attempts: 1 + Int(selector >> 1 & 3),
        limits: DNSMessage.Limits(maximumMessageSize: 512, maximumRecords: 8, maximumPointers: 4)
    )
    var machine = DNSResolverMachine(configuration: configuration, randomSeed: UInt64(selector))
    var model = Model(maximumTries: configuration.attempts * configuration.nameServers.count)
    var now = Instant.zero
    while !input.isAtEnd {
        let operation = input.byte()
        let argument = input.byte()
        switch operation % 9 {
        case 0:
            let question = DNSQuestion(
                name: names[Int(argument) % names.count],
                type: DNSRecordType.allCases[Int(argument >> 2) % DNSRecordType.allCases.count]
            )
            let handle = machine.resolve(question, now: now)
            require(model.queries[handle] == nil, "a handle given twice")
            model.queries[handle] = QueryModel(question: question)
        case 1:
            let handle = model.pick(argument)
            machine.cancel(handle)
            if model.queries[handle].map({ !$0.answered }) == true { model.queries[handle]?.canceled = true }
        case 2, 3:
            let handle = model.pick(argument)
            let message = model.queries[handle]?.message ?? []
            let bytes = reply(
                to: message,
                flags: input.byte(),
                answers: argument,
                body: input.take(Int(input.byte() & 0x3F))
            )
            let server = servers[Int(argument >> 6 & 1)]
            machine.udpReceived(bytes, from: server, query: handle, now: now)
        case 4:
            machine.udpReceived(
                input.take(Int(argument & 0x3F)),
                from: servers[0],
                query: model.pick(argument),
                now: now
            )
        case 5:
            let handle = model.pick(argument)
            if model.queries[handle]?.tcpOpen == true { model.queries[handle]?.tcpConnected = true }
            machine.tcpConnected(query: handle, now: now)
        case 6:
            let handle = model.pick(argument)
            let message = model.queries[handle]?.message ?? []
            var bytes = reply(
                to: message,
                flags: input.byte() & 0xF0,
                answers: argument,
                body: input.take(Int(argument & 0x1F))
            )
            if argument & 0x20 == 0 { bytes = [UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)] + bytes }
            let cut = argument & 0x40 == 0 ? bytes.count : bytes.count / 2
            machine.tcpReceived(Array(bytes[..<cut]), query: handle, now: now)
        case 7:
            // The connection closed on its own (or could not be opened): nothing left to close.
            let handle = model.pick(argument)
            if model.queries[handle]?.tcpOpen == true {
                model.queries[handle]?.tcpOpen = false
                model.queries[handle]?.tcpConnected = false
            }
            machine.tcpClosed(query: handle, error: argument & 1 == 0 ? nil : "reset", now: now)
        default:
            now = now + .milliseconds(Int64(argument) * 20)
            machine.handleTimeout(now: now)
        }
        model.drain(&machine)
    }
    // Every deadline passes: every query still out is answered.
    var rounds = 0
    while let deadline = machine.pollTimeout() {
        rounds += 1
        require(rounds <= 1_000, "deadlines that never end")
        require(deadline >= now || rounds > 0, "a deadline in the past")
        now = max(now, deadline)
        machine.handleTimeout(now: now)
        model.drain(&machine)
    }
    for (handle, query) in model.queries {
        require(query.answered != query.canceled, "query \(handle) neither answered nor canceled, or both")
    }
    return 0
}
