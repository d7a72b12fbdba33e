import Foundation
import TetherCore
import TetherTLS
import TetherXML
import TetherXMPP

/// XMPP client-machine benchmarks: memory per idle online machine, one timer sweep over many
/// machines, and the machine's overhead per received stanza on top of parsing.
struct XMPPClientBenchmarks {
    static let names = ["xmpp-machine-idle", "xmpp-machine-sweep", "xmpp-machine-receive", "xmpp-archive-catch-up"]

    typealias Machine = XMPPClientMachine

    /// Machines stored contiguously, like the hub benchmark's array (a noncopyable machine
    /// cannot be an `Array` element, so this is a buffer the benchmark owns and frees).
    final class Machines {
        let buffer: UnsafeMutableBufferPointer<Machine>
        var count = 0

        init(capacity: Int) {
            buffer = .allocate(capacity: capacity)
        }

        func append(_ machine: consuming Machine) {
            (buffer.baseAddress! + count).initialize(to: machine)
            count += 1
        }

        deinit {
            buffer.baseAddress!.deinitialize(count: count)
            buffer.deallocate()
        }
    }

    let machineCount: Int
    let passes: Int
    let corpus: XMPPCorpus

    static let serverHeader = Array(
        "<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' id='s1' from='example.com' version='1.0'>"
            .utf8
    )

    /// A machine driven through a scripted negotiation (PLAIN, bind, XEP-0198 enabled) to
    /// online, its actions drained.
    /// `configure` changes the configuration first; `sent` sees every text the machine sends on
    /// the way.
    static func onlineMachine(
        seed: UInt64,
        maximumQueuedStanzas: Int = 1000,
        configure: (inout Machine.Configuration) -> Void = { _ in },
        sent: (String) -> Void = { _ in }
    ) -> Machine {
        var configuration = Machine.Configuration(
            jid: JID("bob@example.com")!,
            password: "secret",
            serviceLookup: false,
            tls: .disabled,
            allowPlainOnCleartext: true,
            reconnectPolicy: .tiered(repeats: false),
            fetchRosterOnConnect: false,
            maximumQueuedStanzas: maximumQueuedStanzas
        )
        configure(&configuration)
        var machine = Machine(configuration: configuration, hashProvider: OpenSSLHashProvider(), randomSeed: seed)
        machine.start(now: .zero)
        var generation = TransportGeneration(0)
        var bindID = ""
        func drain(_ machine: inout Machine) {
            while let action = machine.pollAction() {
                switch action {
                case .openTransport(_, let next): generation = next
                case .send(let bytes, _, _):
                    let text = String(decoding: bytes, as: UTF8.self)
                    sent(text)
                    if text.contains("urn:ietf:params:xml:ns:xmpp-bind"), let range = text.range(of: "id='") {
                        bindID = String(text[range.upperBound...].prefix { $0 != "'" })
                    }
                case .request, .closeTransport, .event: break
                }
            }
        }
        drain(&machine)
        machine.transportConnected(generation: generation, now: .zero)
        let script = [
            serverHeader
                + Array(
                    "<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>PLAIN</mechanism></mechanisms></stream:features>"
                        .utf8
                ),
            Array("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>".utf8) + serverHeader
                + Array(
                    "<stream:features><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/><sm xmlns='urn:xmpp:sm:3'/></stream:features>"
                        .utf8
                ),
        ]
        for chunk in script {
            drain(&machine)
            machine.transportReceived(chunk, generation: generation, now: .zero)
        }
        drain(&machine)
        machine.transportReceived(
            Array(
                "<iq type='result' id='\(bindID)'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><jid>bob@example.com/phone</jid></bind></iq><enabled xmlns='urn:xmpp:sm:3' id='sm\(seed)' resume='true'/>"
                    .utf8
            ),
            generation: generation,
            now: .zero
        )
        drain(&machine)
        precondition(machine.stateName == .connected, "the scripted negotiation did not end online")
        return machine
    }

    static let iqStart = Array("<iq".utf8)

    /// Ends of chunks of about `chunkSize` bytes that fall just before a top-level element (a
    /// `<message `, `<presence ` or `<iq ` start, which occur only at the top level of the
    /// corpus); the last one is the stream's end.
    static func stanzaBoundaries(_ stream: ArraySlice<UInt8>, chunkSize: Int) -> [Int] {
        let starts = ["<message ", "<presence ", "<iq "].map { Array($0.utf8) }
        var boundaries: [Int] = []
        var lastStart = stream.startIndex
        var chunkStart = stream.startIndex
        var index = stream.startIndex
        while index < stream.endIndex {
            if stream[index] == UInt8(ascii: "<"),
                starts.contains(where: { stream[index...].starts(with: $0) })
            {
                if index - chunkStart >= chunkSize, lastStart > chunkStart {
                    boundaries.append(lastStart)
                    chunkStart = lastStart
                }
                lastStart = index
            }
            index += 1
        }
        boundaries.append(stream.endIndex)
        return boundaries
    }

    /// The corpus between its features and its closing tag: what an online machine receives.
    func stanzaStream() -> ArraySlice<UInt8> {
        let marker = Array("</stream:features>".utf8)
        var index = 0
        while index + marker.count <= corpus.stream.count {
            if corpus.stream[index..<(index + marker.count)].elementsEqual(marker) { break }
            index += 1
        }
        // Without the closing tag: the stream stays open, as an online machine's does.
        return corpus.stream[(index + marker.count)..<(corpus.stream.count - XMPPCorpus.footer.utf8.count)]
    }

    func run(filter: (String) -> Bool, progress: (String) -> Void) throws -> [BenchmarkResult] {
        var results: [BenchmarkResult] = []
        if filter("xmpp-machine-idle") || filter("xmpp-machine-sweep") {
            progress("bringing \(machineCount) XMPP machines online")
            let before = residentSetSize()
            let machines = Machines(capacity: machineCount)
            for index in 0..<machineCount {
                // Each machine idles for `releaseBuffersAfterIdle` (30 s) once online, so its
                // parser gives its buffers back (the next machine then reuses that memory).
                var machine = Self.onlineMachine(seed: UInt64(index))
                machine.handleTimeout(now: .zero + .seconds(30))
                while machine.pollAction() != nil {}
                machines.append(machine)
            }
            let perMachine = Double(residentSetSize() - before) / Double(machineCount)
            if filter("xmpp-machine-idle") {
                var result = BenchmarkResult(
                    name: "xmpp-machine-idle",
                    bytes: Int(perMachine) * machineCount,
                    messages: machineCount,
                    seconds: 1,
                    mallocsPerMessage: 0,
                    peakRSS: peakResidentSetSize()
                )
                result.note = String(
                    format: "%.0f bytes per idle online machine (target 16384; parser buffers released after 30 s)",
                    perMachine
                )
                results.append(result)
            }
            if filter("xmpp-machine-sweep") {
                progress("xmpp-machine-sweep")
                var idle = measure("xmpp-machine-sweep (nothing due)", bytes: 0, messages: machineCount, passes: passes)
                {
                    let now = Instant.zero + .seconds(31)
                    var count = 0
                    for index in 0..<machines.count {
                        machines.buffer[index].handleTimeout(now: now)
                        while machines.buffer[index].pollAction() != nil { count += 1 }
                    }
                    return count
                }
                idle.note = String(
                    format: "%.1f ms per sweep of %d machines (target 50)",
                    idle.seconds * 1000,
                    machineCount
                )
                results.append(idle)
                var due = measure("xmpp-machine-sweep (ping due)", bytes: 0, messages: machineCount, passes: 1) {
                    let now = Instant.zero + .seconds(60)
                    var count = 0
                    for index in 0..<machines.count {
                        machines.buffer[index].handleTimeout(now: now)
                        while machines.buffer[index].pollAction() != nil { count += 1 }
                    }
                    return count
                }
                due.note = String(format: "%.1f ms per sweep (each machine sends a ping)", due.seconds * 1000)
                results.append(due)
            }
        }
        if filter("xmpp-machine-receive") {
            progress("xmpp-machine-receive")
            let stream = stanzaStream()
            let stanzas = corpus.stanzaCount
            // The parser alone and the machine run alternately, pass by pass; both do the same
            // light work per stanza (its name's length) so that the difference is the machine.
            // Both get the stream in chunks of about 64 KiB that end between stanzas, so that the
            // server's acknowledgement can follow each chunk on the machine's side.
            let boundaries = Self.stanzaBoundaries(stream, chunkSize: 65536)
            let parse: () throws -> Int = {
                var parser = XMLStreamParser()
                var checksum = 0
                parser.append(Self.serverHeader.backDeployedSpan)
                _ = try parser.next()
                var offset = stream.startIndex
                for end in boundaries {
                    parser.append(stream[offset..<end].span)
                    offset = end
                    while let event = try parser.next() {
                        if case .element(let element) = event { checksum &+= element.localName.utf8.count }
                    }
                }
                return checksum
            }
            let machine: () throws -> Int = {
                var machine = Self.onlineMachine(seed: 1)
                let generation = machine.currentGeneration!
                var checksum = 0
                var answered: UInt32 = 0
                var offset = stream.startIndex
                for end in boundaries {
                    machine.transportReceived(stream[offset..<end], generation: generation, now: .zero)
                    offset = end
                    while let action = machine.pollAction() {
                        switch action {
                        case .event(.message(let message)): checksum &+= message.element.localName.utf8.count
                        case .event(.presence(let presence)): checksum &+= presence.element.localName.utf8.count
                        case .send(let bytes, _, _):
                            checksum &+= bytes.count
                            if bytes.starts(with: Self.iqStart) { answered &+= 1 }
                        default: checksum &+= 1
                        }
                    }
                    // The server acknowledges the answers to its pings (as prosody does after
                    // its <r/>), so the XEP-0198 queue stays short as in a real session.
                    machine.transportReceived(
                        Array("<a xmlns='urn:xmpp:sm:3' h='\(answered)'/>".utf8),
                        generation: generation,
                        now: .zero
                    )
                }
                precondition(machine.stateName == .connected, "the machine left the stream")
                return checksum
            }
            var measured = try measureAlternating(
                [
                    ("xmpp-decode (stanzas only)", stream.count, stanzas, parse),
                    ("xmpp-machine-receive", stream.count, stanzas, machine),
                ],
                passes: passes
            )
            measured[1].note = String(
                format: "%+.0f%% over decoding (target 15%%); answers the corpus's pings",
                (measured[1].seconds / measured[0].seconds - 1) * 100
            )
            results += measured
        }
        if filter("xmpp-archive-catch-up") {
            progress("xmpp-archive-catch-up")
            // A catch-up from the account's archive (XEP-0313) after a reconnect: the results of
            // one page, in chunks of about 64 KiB, with a live message after every fourth (held
            // until the catch-up ends), then its end. The time per result must not grow with the
            // catch-up's size (it did: every result copied the ids delivered before it, every held
            // message the ones held before it).
            let sizes = [5000, 20000]
            // The machine of a size, online with its catch-up's query sent (its ids are the same in
            // every pass: the same seed); `query` gets that query's text.
            func catchingUp(_ size: Int, query: inout String) -> Machine {
                Self.onlineMachine(
                    seed: 1,
                    configure: {
                        $0.archiveCatchUp = .init(pageSize: size, maximumMessages: size, maximumHeldMessages: size / 4)
                        $0.state.archivePosition = XMPPArchivePosition(id: "A0")
                    },
                    sent: { if $0.contains("urn:xmpp:mam:2") { query = $0 } }
                )
            }
            // The input, built before the timing: the results in chunks of about 64 KiB, then the end.
            let inputs = try sizes.map { size in
                var query = ""
                _ = catchingUp(size, query: &query)
                guard let queryID = Self.attribute("queryid", in: query), let iqID = Self.attribute("id", in: query)
                else { throw BenchError("no archive query was sent") }
                var chunks: [[UInt8]] = []
                var chunk: [UInt8] = []
                for index in 0..<size {
                    chunk += Array(
                        "<message to='bob@example.com/phone'><result xmlns='urn:xmpp:mam:2' queryid='\(queryID)' id='R\(index)'><forwarded xmlns='urn:xmpp:forward:0'><delay xmlns='urn:xmpp:delay' stamp='2026-12-01T10:00:00Z'/><message xmlns='jabber:client' from='alice@example.com/x' to='bob@example.com' id='m\(index)' type='chat'><body>message \(index)</body></message></forwarded></result></message>"
                            .utf8
                    )
                    if index % 4 == 3 {
                        chunk += Array(
                            "<message from='alice@example.com/x' to='bob@example.com/phone' id='l\(index)' type='chat'><body>live \(index)</body></message>"
                                .utf8
                        )
                    }
                    if chunk.count >= 65536 {
                        chunks.append(chunk)
                        chunk = []
                    }
                }
                let end = "<iq type='result' id='\(iqID)'><fin xmlns='urn:xmpp:mam:2' complete='true'/></iq>"
                chunks.append(chunk + Array(end.utf8))
                return (query, chunks)
            }
            let catchUps = zip(sizes, inputs).map { size, input in
                { () throws -> Int in
                    var query = ""
                    var machine = catchingUp(size, query: &query)
                    guard query == input.0 else { throw BenchError("the archive query differs between passes") }
                    let generation = machine.currentGeneration!
                    var delivered = 0
                    for chunk in input.1 {
                        machine.transportReceived(chunk, generation: generation, now: .zero)
                        while let action = machine.pollAction() {
                            if case .event(.message) = action { delivered += 1 }
                        }
                    }
                    guard delivered == size + size / 4 else {
                        throw BenchError("\(delivered) of \(size + size / 4) messages delivered")
                    }
                    return delivered
                }
            }
            var measured = try measureAlternating(
                zip(sizes, catchUps).map { size, body in
                    ("xmpp-archive-catch-up (\(size.formatted()) results)", 0, size, body)
                },
                passes: passes
            )
            let growth = (measured[1].seconds / Double(sizes[1])) / (measured[0].seconds / Double(sizes[0]))
            measured[0].note = String(format: "%.1f µs per result", measured[0].seconds / Double(sizes[0]) * 1e6)
            measured[1].note = String(
                format: "%.2fx the time per result of 5,000 (target 1.5: as long per result however many)",
                growth
            )
            results += measured
        }
        return results
    }

    /// The value of the first `name='…'` attribute in `text`.
    static func attribute(_ name: String, in text: String) -> String? {
        guard let range = text.range(of: " \(name)='") else { return nil }
        return String(text[range.upperBound...].prefix { $0 != "'" })
    }
}
