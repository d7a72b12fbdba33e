/// One SignalR hub message (HubProtocol.md "Message Types"), independent of the hub protocol.
///
/// Payload values (arguments, results, stream items) stay encoded as `EncodedValue`s until the app
/// decodes them; everything else is plain Swift values.
public enum HubMessage: Hashable, Sendable {
    /// Type 1: a call of `target`; blocking when it has an invocation id.
    case invocation(InvocationMessage)
    /// Type 2: one item of a stream (either direction).
    case streamItem(StreamItemMessage)
    /// Type 3: the end of an invocation or a stream.
    case completion(CompletionMessage)
    /// Type 4: a call of `target` whose result is a stream.
    case streamInvocation(StreamInvocationMessage)
    /// Type 5: asks the callee to stop a stream (or invocation).
    case cancelInvocation(CancelInvocationMessage)
    /// Type 6: keep-alive.
    case ping
    /// Type 7: the sender is closing the connection.
    case close(CloseMessage)
    /// Type 8: stateful reconnect: every message up to `sequenceId` was received.
    case ack(sequenceId: Int64)
    /// Type 9: stateful reconnect: the next message the sender sends has `sequenceId`.
    case sequence(sequenceId: Int64)

    /// The message's numeric type on the wire.
    public var messageType: Int {
        switch self {
        case .invocation: 1
        case .streamItem: 2
        case .completion: 3
        case .streamInvocation: 4
        case .cancelInvocation: 5
        case .ping: 6
        case .close: 7
        case .ack: 8
        case .sequence: 9
        }
    }

    /// Whether stateful reconnect numbers, buffers and acknowledges this message (types 1–5).
    public var isSequenced: Bool { messageType <= 5 }
}

/// Message headers: string keys and values (never `nil`).
public typealias HubMessageHeaders = [String: String]

/// Type 1: Invocation.
public struct InvocationMessage: Hashable, Sendable {
    // The stored properties are declared in an order of their own so that the synthesized
    // memberwise initializer, `init(target:arguments:invocationId:headers:streamIds:)`
    // (internal), differs from the public one below: the decoders build messages with it, because
    // a message built by an explicit initializer and then wrapped in `HubMessage` was copied and
    // the original destroyed (a retain and a release of each reference in it, per message; an
    // explicit initializer marked `@inline(__always)` measured the same). Tests pin the order:
    // `DecodedMessageLayoutTests`.

    /// The method to call.
    public var target: String
    /// The arguments (upload-stream placeholders excluded).
    public var arguments: EncodedArguments
    /// The id the callee answers with a Completion; nil for a non-blocking call.
    public var invocationId: String?
    /// Headers, usually empty.
    public var headers: HubMessageHeaders
    /// Ids of client→server streams that provide further arguments, if any.
    public var streamIds: [String]?
}

extension InvocationMessage {
    /// Creates an invocation.
    public init(
        headers: HubMessageHeaders = [:],
        invocationId: String? = nil,
        target: String,
        arguments: EncodedArguments,
        streamIds: [String]? = nil
    ) {
        self.init(
            target: target,
            arguments: arguments,
            invocationId: invocationId,
            headers: headers,
            streamIds: streamIds
        )
    }
}

/// Type 4: StreamInvocation.
public struct StreamInvocationMessage: Hashable, Sendable {
    // Stored in this order for a memberwise initializer of its own (see `InvocationMessage`).

    /// The streaming method to call.
    public var target: String
    /// The arguments (upload-stream placeholders excluded).
    public var arguments: EncodedArguments
    /// The stream's id, used by its StreamItems, Completion and CancelInvocation.
    public var invocationId: String
    /// Headers, usually empty.
    public var headers: HubMessageHeaders
    /// Ids of client→server streams that provide further arguments, if any.
    public var streamIds: [String]?
}

extension StreamInvocationMessage {
    /// Creates a stream invocation.
    public init(
        headers: HubMessageHeaders = [:],
        invocationId: String,
        target: String,
        arguments: EncodedArguments,
        streamIds: [String]? = nil
    ) {
        self.init(
            target: target,
            arguments: arguments,
            invocationId: invocationId,
            headers: headers,
            streamIds: streamIds
        )
    }
}

/// Type 2: StreamItem.
public struct StreamItemMessage: Hashable, Sendable {
    // Stored in this order for a memberwise initializer of its own (see `InvocationMessage`).

    /// The stream the item belongs to.
    public var invocationId: String
    /// The item (may be null).
    public var item: EncodedValue
    /// Headers, usually empty.
    public var headers: HubMessageHeaders
}

extension StreamItemMessage {
    /// Creates a stream item.
    public init(headers: HubMessageHeaders = [:], invocationId: String, item: EncodedValue) {
        self.init(invocationId: invocationId, item: item, headers: headers)
    }
}

/// How an invocation or stream ended.
public enum CompletionResult: Hashable, Sendable {
    /// No value (a void method, or the end of a stream).
    case void
    /// A result value (may be null).
    case value(EncodedValue)
    /// The callee's error text.
    case error(String)
}

/// Type 3: Completion.
public struct CompletionMessage: Hashable, Sendable {
    // Stored in this order for a memberwise initializer of its own (see `InvocationMessage`).

    /// The invocation or stream that ended.
    public var invocationId: String
    /// Its outcome.
    public var result: CompletionResult
    /// Headers, usually empty.
    public var headers: HubMessageHeaders
}

extension CompletionMessage {
    /// Creates a completion.
    public init(headers: HubMessageHeaders = [:], invocationId: String, result: CompletionResult) {
        self.init(invocationId: invocationId, result: result, headers: headers)
    }
}

/// Type 5: CancelInvocation.
public struct CancelInvocationMessage: Hashable, Sendable {
    // Stored in this order for a memberwise initializer of its own (see `InvocationMessage`).

    /// The stream (or invocation) to cancel.
    public var invocationId: String
    /// Headers, usually empty.
    public var headers: HubMessageHeaders
}

extension CancelInvocationMessage {
    /// Creates a cancellation.
    public init(headers: HubMessageHeaders = [:], invocationId: String) {
        self.init(invocationId: invocationId, headers: headers)
    }
}

/// Type 7: Close.
public struct CloseMessage: Hashable, Sendable {
    /// Why the sender closes; nil for a normal close (the empty string is still an error).
    public var error: String?
    /// Whether the receiver may reconnect (only `true` enters the reconnect path).
    public var allowReconnect: Bool

    /// Creates a close message.
    public init(error: String? = nil, allowReconnect: Bool = false) {
        self.error = error
        self.allowReconnect = allowReconnect
    }
}
