import Testing
import TetherCore
import TetherMessagePack

@testable import TetherSignalR

/// The parsers take arrays and slices of a capture as well as spans (a span of a temporary slice,
/// `parser.append(capture[n...].span)`, does not compile: its lifetime ends with the statement).
struct ByteInputTests {
    @Test func slicesOfACaptureAfterItsHandshake() throws {
        let capture = Array("{}\u{1E}{\"type\":6}\u{1E}{\"type\":1,\"target\":\"A\",\"arguments\":[1]}\u{1E}".utf8)
        let (_, consumed) = try #require(try HandshakeResponse.parse(capture.span))
        var sliced = JSONHubProtocol().makeParser()
        sliced.append(capture[consumed...])
        var whole = JSONHubProtocol().makeParser()
        whole.append(Array(capture[consumed...]))
        for parser in [sliced, whole] {
            var parser = parser
            #expect(try parser.next() == .ping)
            guard case .invocation(let invocation) = try parser.next() else {
                Issue.record("no invocation")
                continue
            }
            #expect(invocation.target == "A")
            #expect(try parser.next() == nil)
        }
    }

    @Test func aHandshakeFedToTheHubParserSaysSo() {
        var parser = JSONHubProtocol().makeParser()
        parser.append(Array("{\"protocol\":\"json\",\"version\":1}\u{1E}".utf8))
        do {
            _ = try parser.next()
            Issue.record("a handshake request parsed as a hub message")
        } catch {
            #expect(error.message.hasPrefix("Missing required property 'type'."))
            #expect(error.message.contains("HandshakeRequest.parse"))
        }
    }
}

struct DescriptionTests {
    @Test func actionsReadAsTextOrHexWithoutSecrets() {
        let text = HubConnectionMachine.Action.send(
            Array("{\"type\":6}\u{1E}".utf8),
            generation: TransportGeneration(3)
        )
        #expect(text.description == "send(#3, 11 bytes: {\"type\":6}␞)")
        let binary = HubConnectionMachine.Action.send([0x02, 0x91, 0x06], generation: .init(4))
        #expect(binary.description == "send(#4, 3 bytes: 02 91 06)")
        let negotiate = HubConnectionMachine.Action.request(
            .negotiate(
                url: ServerURL("https://h/hub/negotiate?access_token=secret-token")!,
                headers: ["Authorization": "Bearer secret-token", "X-A": "1"],
                generation: .init(1)
            )
        )
        #expect(!negotiate.description.contains("secret-token"))
        #expect(negotiate.description.contains("Authorization"))
        let long = ByteDescription.describe(Array(repeating: UInt8(ascii: "a"), count: 500), limit: 10)
        #expect(long == "500 bytes: aaaaaaaaaa…")
    }
}
