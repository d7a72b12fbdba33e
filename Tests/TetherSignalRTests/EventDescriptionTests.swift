import Testing
import TetherCore
import TetherSignalR

/// The hub machine's events describe themselves in one line, counting arguments and results
/// instead of showing them (they may carry what a log must not).
struct HubEventDescriptionTests {
    typealias Event = HubConnectionMachine.Event

    @Test func eventsReadAsOneLineWithoutTheirValues() throws {
        let arguments = try EncodedArguments(encoding: .json, "alice", "the secret plan")
        let invocation = InvocationMessage(invocationId: "7", target: "ReceiveMessage", arguments: arguments)
        let events: [(Event, String)] = [
            (
                .invocation(invocation, handler: "ReceiveMessage"),
                "invocation of ReceiveMessage (2 arguments), id 7, for the handler of ReceiveMessage"
            ),
            (.unhandledInvocation(invocation), "unhandled invocation of ReceiveMessage (2 arguments), id 7"),
            (
                .completion(invocationId: "3", result: .success(try EncodedValue(42, encoding: .json))),
                "completion of 3: a result"
            ),
            (.completion(invocationId: "4", result: .success(nil)), "completion of 4: no result"),
            (
                .streamItem(invocationId: "5", item: try EncodedValue("the secret plan", encoding: .json)),
                "stream item of 5"
            ),
            (.streamCompleted(invocationId: "5", error: nil), "stream 5 completed"),
            (.sendBufferAvailable, "the send buffer has room"),
        ]
        for (event, text) in events {
            #expect(event.description == text)
            #expect(!event.description.contains("secret plan"))
        }
    }
}
