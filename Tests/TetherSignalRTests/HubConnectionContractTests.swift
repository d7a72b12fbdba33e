import Foundation
import Testing
import TetherCore
import TetherMessagePack
import TetherTestSupport

@testable import TetherSignalR

/// The hub machine on the shared contract: `Encodable` arguments in the connection's encoding,
/// mismatched encodings refused with an error (never a crash), a token asked for on every
/// attempt, stale generations ignored.
struct HubConnectionContractTests {
    struct Group: Codable, Equatable {
        var platUserId: Int

        enum CodingKeys: String, CodingKey {
            case platUserId = "PlatUserId"
        }
    }

    @Test func encodableArgumentsInTheConnectionsEncoding() throws {
        var harness = HubConnectionHarness()
        harness.connect()
        // As a new user writes it: plain values and a dictionary literal, no encoding chosen.
        let id = try harness.machine.invoke("AddToGroup", "room-1", [["PlatUserId": 32323]], now: harness.now)
        harness.drain()
        guard case .invocation(let call) = harness.sentMessages.last else {
            Issue.record("no invocation")
            return
        }
        #expect(call.invocationId == id && call.target == "AddToGroup")
        #expect(try call.arguments.decode(String.self, at: 0) == "room-1")
        #expect(try call.arguments.decode([[String: Int]].self, at: 1) == [["PlatUserId": 32323]])
        try harness.machine.send("Log", Group(platUserId: 7), now: harness.now)
        harness.drain()
        guard case .invocation(let logged) = harness.sentMessages.last else {
            Issue.record("no send")
            return
        }
        #expect(try logged.arguments.decode(Group.self, at: 0) == Group(platUserId: 7))
    }

    @Test func encodableArgumentsOnAMessagePackConnection() throws {
        var machine = HubConnectionMachine(
            configuration: .init(url: HubConnectionHarness.url, skipNegotiation: true),
            hubProtocol: .messagePack(MessagePackHubProtocol()),
            randomSeed: 1
        )
        machine.start(now: .zero)
        var generation = TransportGeneration(0)
        var format: MessageFormat?
        while let action = machine.pollAction() {
            if case .openTransport(let request, let next) = action {
                generation = next
                format = request.messageFormat
            }
        }
        #expect(format == .binary)
        machine.transportConnected(generation: generation, now: .zero)
        machine.transportReceived(Array("{}\u{1E}".utf8), generation: generation, now: .zero)
        while machine.pollAction() != nil {}
        #expect(machine.stateName == .connected)
        _ = try machine.invoke("AddToGroup", "room-1", [["PlatUserId": 32323]], now: .zero)
        var sent: [UInt8] = []
        while let action = machine.pollAction() {
            if case .send(let bytes, _, _) = action { sent = bytes }
        }
        var parser = MessagePackHubProtocol().makeParser()
        parser.append(sent.backDeployedSpan)
        guard case .invocation(let call) = try parser.next() else {
            Issue.record("no invocation")
            return
        }
        #expect(try call.arguments.decode([[String: Int]].self, at: 1) == [["PlatUserId": 32323]])
        // A JSON value on this MessagePack connection: an error, not a crash.
        let json = try EncodedArguments(encoding: .json, "x")
        expectThrows(\HubConnectionError.kind, .encoding) { try machine.invoke("Echo", arguments: json, now: .zero) }
        expectThrows(\HubConnectionError.kind, .encoding) { try machine.send("Echo", arguments: json, now: .zero) }
        #expect(machine.pollAction() == nil)
    }

    /// With a token provider, every attempt asks for a token first, and the one fetched for the
    /// reconnect is the one used.
    @Test func tokenAskedForOnEveryAttempt() {
        var harness = HubConnectionHarness {
            $0.asksForAccessToken = true
            $0.accessToken = nil
            $0.reconnectPolicy = .signalRDefault
        }
        harness.machine.start(now: harness.now)
        #expect(harness.drain() == ["token"])
        harness.machine.accessTokenFetched("first", generation: harness.generation, now: harness.now)
        harness.drain()
        guard case .request(.negotiate(_, let headers, _)) = harness.actions.last else {
            Issue.record("no negotiate")
            return
        }
        #expect(headers["Authorization"] == "Bearer first")
        harness.negotiate()
        guard case .openTransport(let request, _) = harness.actions.last else {
            Issue.record("no open")
            return
        }
        #expect(request.headers["Authorization"] == "Bearer first")
        harness.opened()
        harness.server("{}")
        harness.closed()
        #expect(harness.advance(by: .zero) == ["token"])
        // A late answer for the first attempt's token is ignored.
        harness.machine.accessTokenFetched("stale", generation: TransportGeneration(1), now: harness.now)
        #expect(harness.drain().isEmpty)
        harness.machine.accessTokenFetched("refreshed", generation: harness.generation, now: harness.now)
        harness.drain()
        guard case .request(.negotiate(_, let again, _)) = harness.actions.last else {
            Issue.record("no negotiate")
            return
        }
        #expect(again["Authorization"] == "Bearer refreshed")
        // Tokens never appear in errors or event descriptions.
        #expect(!harness.events.map { "\($0)" }.joined().contains("refreshed"))
    }

    /// Input from a transport the machine abandoned (a reconnect, or stop then start) changes
    /// nothing.
    @Test func staleTransportsAreIgnored() {
        var harness = HubConnectionHarness { $0.reconnectPolicy = .signalRDefault }
        harness.connect()
        let old = harness.generation
        harness.machine.stop(now: harness.now)
        harness.drain()
        harness.machine.start(now: harness.now)
        harness.drain()
        #expect(harness.generation > old)
        harness.machine.negotiateResponse(
            status: 200,
            body: HubConnectionHarness.negotiateBody(),
            generation: old,
            now: harness.now
        )
        harness.machine.transportConnected(generation: old, now: harness.now)
        harness.machine.transportReceived(Array("{}\u{1E}".utf8), generation: old, now: harness.now)
        harness.machine.transportClosed(
            generation: old,
            error: TransportError(.connectionLost, "late"),
            now: harness.now
        )
        #expect(harness.drain().isEmpty)
        #expect(harness.machine.stateName == .negotiating)
    }
}
