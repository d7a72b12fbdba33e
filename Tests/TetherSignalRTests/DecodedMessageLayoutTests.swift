import Testing
import TetherCore

@testable import TetherSignalR

/// The decoders build the hub messages with the synthesized memberwise initializers (internal),
/// whose parameter order differs from the public initializers because the stored properties are
/// declared in an order of their own. Built by an explicit initializer and then wrapped in
/// `HubMessage`, a message is copied and the original destroyed in optimized builds (measured with
/// callgrind: +2 % instructions per JSON message, +4 % per MessagePack message, even with the
/// explicit initializer marked `@inline(__always)`). A copy cannot be observed in the debug-built
/// test suite, so these tests pin what keeps it away: the stored-property order, and the decoders'
/// memberwise calls compiling against it.
@Suite("Decoded message layout")
struct DecodedMessageLayoutTests {
    /// The stored properties, in declaration order, of a value the decoder produced.
    private func storedProperties(_ value: Any) -> [String] {
        Mirror(reflecting: value).children.compactMap(\.label)
    }

    private func decoded(_ json: String) throws -> HubMessage {
        var parser = JSONHubMessageParser()
        parser.append(Array("\(json)\u{1e}".utf8))
        return try #require(try parser.next())
    }

    @Test("Stored-property order keeps each memberwise initializer apart from the public one")
    func storedPropertyOrder() throws {
        let why =
            "the decoders call the synthesized memberwise initializer; a different stored-property order changes (or removes) it: see InvocationMessage"
        let invocation = try decoded(#"{"type":1,"target":"T","arguments":[],"invocationId":"1"}"#)
        guard case .invocation(let message) = invocation else {
            Issue.record("not an invocation")
            return
        }
        #expect(
            storedProperties(message) == ["target", "arguments", "invocationId", "headers", "streamIds"],
            Comment(rawValue: why)
        )

        let stream = try decoded(#"{"type":4,"target":"T","arguments":[],"invocationId":"1"}"#)
        guard case .streamInvocation(let message) = stream else {
            Issue.record("not a stream invocation")
            return
        }
        #expect(
            storedProperties(message) == ["target", "arguments", "invocationId", "headers", "streamIds"],
            Comment(rawValue: why)
        )

        let item = try decoded(#"{"type":2,"invocationId":"1","item":5}"#)
        guard case .streamItem(let message) = item else {
            Issue.record("not a stream item")
            return
        }
        #expect(storedProperties(message) == ["invocationId", "item", "headers"], Comment(rawValue: why))

        let completion = try decoded(#"{"type":3,"invocationId":"1","result":5}"#)
        guard case .completion(let message) = completion else {
            Issue.record("not a completion")
            return
        }
        #expect(storedProperties(message) == ["invocationId", "result", "headers"], Comment(rawValue: why))

        let cancel = try decoded(#"{"type":5,"invocationId":"1"}"#)
        guard case .cancelInvocation(let message) = cancel else {
            Issue.record("not a cancellation")
            return
        }
        #expect(storedProperties(message) == ["invocationId", "headers"], Comment(rawValue: why))
    }

    @Test("The memberwise initializers the decoders call exist with these labels and differ from the public ones")
    func memberwiseInitializers() throws {
        guard case .invocation(let decodedInvocation) = try decoded(#"{"type":1,"target":"T","arguments":[1]}"#)
        else {
            Issue.record("not an invocation")
            return
        }
        let arguments = decodedInvocation.arguments
        // These calls compile only against the synthesized initializers (no explicit initializer
        // takes these labels in this order), so a reordering breaks this file as well as the
        // decoders, and the first test says why.
        let invocation = InvocationMessage(
            target: "T",
            arguments: arguments,
            invocationId: nil,
            headers: [:],
            streamIds: nil
        )
        let viaPublic = InvocationMessage(headers: [:], invocationId: nil, target: "T", arguments: arguments)
        #expect(invocation == viaPublic)
        let stream = StreamInvocationMessage(
            target: "T",
            arguments: arguments,
            invocationId: "1",
            headers: [:],
            streamIds: nil
        )
        #expect(stream == StreamInvocationMessage(invocationId: "1", target: "T", arguments: arguments))
        let item = StreamItemMessage(invocationId: "1", item: arguments[0], headers: [:])
        #expect(item == StreamItemMessage(headers: [:], invocationId: "1", item: arguments[0]))
        let completion = CompletionMessage(invocationId: "1", result: .void, headers: [:])
        #expect(completion == CompletionMessage(headers: [:], invocationId: "1", result: .void))
        let cancel = CancelInvocationMessage(invocationId: "1", headers: [:])
        #expect(cancel == CancelInvocationMessage(headers: [:], invocationId: "1"))
    }
}
