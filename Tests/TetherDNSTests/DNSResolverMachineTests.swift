import Testing

@testable import TetherCore
@testable import TetherDNS

struct DNSResolverMachineTests {
    static let servers = [Endpoint(host: "127.0.0.1", port: 5353), Endpoint(host: "127.0.0.2", port: 53)]
    static let question = DNSQuestion(name: "_xmpp-client._tcp.example.com", type: .srv)
    static let start = Instant(nanoseconds: 1_000_000_000)

    static func machine() -> DNSResolverMachine {
        DNSResolverMachine(configuration: .init(nameServers: servers, timeout: .seconds(2), attempts: 2), randomSeed: 7)
    }

    static func drain(_ machine: inout DNSResolverMachine) -> [DNSResolverMachine.Action] {
        var actions: [DNSResolverMachine.Action] = []
        while let action = machine.pollAction() { actions.append(action) }
        return actions
    }

    /// The answer to `query` (its ID and question), with `flags` and one SRV record.
    static func answer(to query: [UInt8], flags: UInt16 = 0x8180, truncated: Bool = false) -> [UInt8] {
        var bytes = query
        let flags = truncated ? flags | 0x0200 : flags
        bytes[2] = UInt8(flags >> 8)
        bytes[3] = UInt8(flags & 0xFF)
        bytes[7] = 1  // one answer
        bytes[11] = 0  // no additional (the OPT record goes)
        bytes.removeLast(11)
        bytes += DNSMessageTests.record(
            [0xC0, 12],
            type: 33,
            data: DNSMessageTests.u16(0) + DNSMessageTests.u16(0) + DNSMessageTests.u16(5222)
                + DNSMessageTests.name("xmpp.example.com")
        )
        return bytes
    }

    static func sent(_ actions: [DNSResolverMachine.Action]) -> (bytes: [UInt8], server: Endpoint, query: Int)? {
        for action in actions {
            if case .sendUDP(let bytes, let server, let query) = action { return (bytes, server, query) }
        }
        return nil
    }

    static func answered(_ actions: [DNSResolverMachine.Action]) -> Result<DNSResponse, DNSResolverMachine.Failure>? {
        for action in actions {
            if case .answered(_, let result) = action { return result }
        }
        return nil
    }

    @Test func anAnswerFromTheServerAskedIsTheQuerys() throws {
        var machine = Self.machine()
        let handle = machine.resolve(Self.question, now: Self.start)
        let query = try #require(Self.sent(Self.drain(&machine)))
        #expect(query.server == Self.servers[0] && query.query == handle)
        #expect(machine.pollTimeout() == Self.start + .seconds(2))
        // Another source, another ID: ignored.
        machine.udpReceived(Self.answer(to: query.bytes), from: Self.servers[1], query: handle, now: Self.start)
        var wrongID = Self.answer(to: query.bytes)
        wrongID[1] ^= 0xFF
        machine.udpReceived(wrongID, from: Self.servers[0], query: handle, now: Self.start)
        #expect(Self.drain(&machine).isEmpty)
        machine.udpReceived(Self.answer(to: query.bytes), from: Self.servers[0], query: handle, now: Self.start)
        let response = try #require(try Self.answered(Self.drain(&machine))?.get())
        #expect(response.records(for: Self.question.name, type: .srv).count == 1)
        #expect(machine.pollTimeout() == nil)
    }

    @Test func timeoutsAndServerFailuresMoveToTheNextServerUntilTriesRunOut() throws {
        var machine = Self.machine()
        let handle = machine.resolve(Self.question, now: Self.start)
        let first = try #require(Self.sent(Self.drain(&machine)))
        machine.handleTimeout(now: Self.start + .seconds(2))
        let second = try #require(Self.sent(Self.drain(&machine)))
        #expect(second.server == Self.servers[1] && second.bytes == first.bytes)
        machine.udpReceived(
            Self.answer(to: second.bytes, flags: 0x8182),
            from: Self.servers[1],
            query: handle,
            now: Self.start
        )
        let third = try #require(Self.sent(Self.drain(&machine)))
        #expect(third.server == Self.servers[0])
        machine.handleTimeout(now: Self.start + .seconds(10))
        #expect(Self.sent(Self.drain(&machine))?.server == Self.servers[1])
        machine.handleTimeout(now: Self.start + .seconds(20))
        guard case .failure(let failure) = Self.answered(Self.drain(&machine)) else {
            return #expect(Bool(false), "no failure after four tries")
        }
        #expect(failure.message.contains("after 4 tries"), "\(failure)")
        #expect(failure.message.contains("127.0.0.2:53 answered serverFailure"), "\(failure)")
        #expect(machine.pollTimeout() == nil)
    }

    @Test func noSuchNameIsAnAnswer() throws {
        var machine = Self.machine()
        let handle = machine.resolve(Self.question, now: Self.start)
        let query = try #require(Self.sent(Self.drain(&machine)))
        var nxdomain = query.bytes
        nxdomain[2] = 0x81
        nxdomain[3] = 0x83
        nxdomain[11] = 0
        nxdomain.removeLast(11)
        machine.udpReceived(nxdomain, from: Self.servers[0], query: handle, now: Self.start)
        let response = try #require(try Self.answered(Self.drain(&machine))?.get())
        #expect(response.responseCode == .nameError && response.answers.isEmpty)
    }

    /// A truncated answer: the same server over TCP, the length-prefixed answer read in any pieces.
    @Test func aTruncatedAnswerIsAskedAgainOverTCP() throws {
        let whole = Self.answer(to: try DNSMessage.query(Self.question, id: 0))  // for its length
        for cut in 0...(whole.count + 2) {
            var machine = Self.machine()
            let handle = machine.resolve(Self.question, now: Self.start)
            let query = try #require(Self.sent(Self.drain(&machine)))
            machine.udpReceived(
                Self.answer(to: query.bytes, truncated: true),
                from: Self.servers[0],
                query: handle,
                now: Self.start
            )
            #expect(Self.drain(&machine) == [.openTCP(to: Self.servers[0], query: handle)])
            machine.tcpConnected(query: handle, now: Self.start)
            let length = query.bytes.count
            #expect(
                Self.drain(&machine) == [
                    .sendTCP([UInt8(length >> 8), UInt8(length & 0xFF)] + query.bytes, query: handle)
                ]
            )
            let answer = Self.answer(to: query.bytes)
            let framed = [UInt8(answer.count >> 8), UInt8(answer.count & 0xFF)] + answer
            machine.tcpReceived(Array(framed[..<cut]), query: handle, now: Self.start)
            machine.tcpReceived(Array(framed[cut...]), query: handle, now: Self.start)
            let actions = Self.drain(&machine)
            #expect(actions.first == .closeTCP(query: handle), "cut \(cut)")
            #expect((try? Self.answered(actions)?.get())?.answers.count == 1, "cut \(cut)")
        }
    }

    @Test func aTCPFailureIsThatServersAndCancelClosesIt() throws {
        var machine = Self.machine()
        let handle = machine.resolve(Self.question, now: Self.start)
        let query = try #require(Self.sent(Self.drain(&machine)))
        machine.udpReceived(
            Self.answer(to: query.bytes, truncated: true),
            from: Self.servers[0],
            query: handle,
            now: Self.start
        )
        _ = Self.drain(&machine)
        machine.tcpClosed(query: handle, error: "connection refused", now: Self.start)
        #expect(Self.sent(Self.drain(&machine))?.server == Self.servers[1])
        machine.udpReceived(
            Self.answer(to: query.bytes, truncated: true),
            from: Self.servers[1],
            query: handle,
            now: Self.start
        )
        _ = Self.drain(&machine)
        machine.cancel(handle)
        #expect(Self.drain(&machine) == [.closeTCP(query: handle)])
        #expect(machine.pollTimeout() == nil)
        // Without nameservers, or for a name that cannot be asked: a failure at once.
        var none = DNSResolverMachine(configuration: .init(nameServers: []), randomSeed: 1)
        none.resolve(Self.question, now: Self.start)
        guard case .failure = Self.answered(Self.drain(&none)) else { return #expect(Bool(false)) }
        var bad = Self.machine()
        bad.resolve(DNSQuestion(name: "a..b", type: .a), now: Self.start)
        guard case .failure = Self.answered(Self.drain(&bad)) else { return #expect(Bool(false)) }
    }
}
