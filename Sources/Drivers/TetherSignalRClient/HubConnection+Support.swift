import Dispatch
import TetherCore
@_spi(TetherInternal) import TetherDispatch
import TetherSignalR

extension HubConnection {
    /// A registered handler of a server→client method.
    struct InvocationHandler: Sendable {
        let queue: DispatchQueue
        let call: @Sendable (EncodedArguments) throws -> Void
    }

    /// A registered client-result handler: decodes, runs the app's code, encodes its answer.
    struct ResultHandler: Sendable {
        let call: @Sendable (EncodedArguments, ValueEncoding) async throws -> EncodedValue
    }

    /// Where the items of one server→client stream go. Its members are used only on the
    /// runner's queue.
    final class StreamSink: @unchecked Sendable {
        /// Decodes and hands on an item; false when it did not decode (the stream has then
        /// ended with the error).
        let yield: (EncodedValue) -> Bool
        /// Ends the stream (with an error, or normally).
        let finish: (HubConnectionError?) -> Void
        /// The stream's invocation id, once it is sent.
        var invocationId: String?
        /// The consumer stopped iterating before the stream was sent.
        var consumerLeft = false

        init(
            yield: @escaping @Sendable (EncodedValue) -> Bool,
            finish: @escaping @Sendable (HubConnectionError?) -> Void
        ) {
            self.yield = yield
            self.finish = finish
        }
    }

    /// Feeds one client→server stream from an `AsyncSequence`, on a task of its own: each item
    /// is encoded there and handed to `Send`, which returns once the machine took it (or
    /// refused it: the pump then stops).
    struct UploadPump: Sendable {
        enum Item: Sendable {
            case item(EncodedValue)
            /// The end of the sequence (with the error text when it threw).
            case end(String?)
        }
        typealias Send = @Sendable (Item) async -> Result<Void, HubConnectionError>

        let run: @Sendable (@escaping Send) -> Void

        init<Upload: AsyncSequence & Sendable>(_ upload: Upload, encoding: ValueEncoding)
        where Upload.Element: Encodable {
            run = { send in
                Task {
                    do {
                        for try await element in upload {
                            let value: EncodedValue
                            do {
                                value = try EncodedValue(element, encoding: encoding)
                            } catch {
                                _ = await send(.end("The stream item cannot be encoded: \(error)"))
                                return
                            }
                            if case .failure = await send(.item(value)) { return }
                        }
                        _ = await send(.end(nil))
                    } catch {
                        _ = await send(.end("\(error)"))
                    }
                }
            }
        }
    }
}

extension HubConnectionError {
    /// An `invoke` whose task was canceled.
    static let canceledByTask = HubConnectionError(.canceled, "The invocation's task was canceled.")
}

/// Decodes a handler's arguments one after another.
final class ArgumentCursor {
    private let arguments: EncodedArguments
    private var index = 0

    init(_ arguments: EncodedArguments) {
        self.arguments = arguments
    }

    func next<Value: Decodable>(_ type: Value.Type) throws -> Value {
        defer { index += 1 }
        guard index < arguments.count else {
            throw HubConnectionError(
                .encoding,
                "The invocation has \(arguments.count) argument(s), fewer than the handler takes."
            )
        }
        do {
            return try arguments.decodeByItsFastPath(Value.self, at: index)
        } catch {
            throw HubConnectionError(.encoding, "Argument \(index + 1) cannot be decoded as \(Value.self): \(error)")
        }
    }
}

/// What the connection's log shows of URLs and messages: secrets redacted, messages cut short.
enum HubLog {
    /// A message for the trace log: text as it is (cut at 1,000 bytes), binary as hex (cut at
    /// 128 bytes).
    static func describe(_ bytes: [UInt8], format: TransferFormat) -> String {
        switch format {
        case .text:
            let shown = String(decoding: bytes.prefix(1000), as: UTF8.self)
            return bytes.count > 1000 ? "\(shown)… (\(bytes.count) bytes)" : shown
        case .binary:
            let hex = bytes.prefix(128).map { byte in
                let digits = String(byte, radix: 16)
                return byte < 16 ? "0" + digits : digits
            }
            return hex.joined(separator: " ") + (bytes.count > 128 ? " … (\(bytes.count) bytes)" : "")
        }
    }
}

extension HubConnection.Event: CustomStringConvertible {
    /// One line per event: `connected: …`, `unhandled invocation of ReceiveMessage (2 arguments)`
    /// (arguments are counted, not shown: they may carry what a log must not).
    public var description: String {
        switch self {
        case .lifecycle(let change): change.description
        case .unhandledInvocation(let invocation):
            "unhandled invocation of \(invocation.target) (\(invocation.arguments.count) arguments"
                + (invocation.invocationId.map { ", id \($0)" } ?? "") + ")"
        }
    }
}

// The client's handlers, results and stream items take their types as `Decodable` (parameter
// packs cannot be overloaded by protocol), so the fast path a type offers for the connection's
// encoding (`Specs/fast-paths.md`) is looked up at run time here: a conformance check per value,
// against the `Codable` path's several thousand instructions.

extension EncodedArguments {
    /// The argument at `index` as a `T`, by `T`'s fast path for this encoding if it has one.
    func decodeByItsFastPath<T: Decodable>(_ type: T.Type, at index: Int) throws -> T {
        switch encoding {
        case .messagePack:
            if let fast = T.self as? any MessagePackDecodable.Type,
                let value = try decodeMessagePack(fast, at: index) as? T
            {
                return value
            }
        case .json:
            if let fast = T.self as? any JSONDecodable.Type, let value = try decodeJSON(fast, at: index) as? T {
                return value
            }
        }
        return try decode(T.self, at: index)
    }

    private func decodeMessagePack<T: MessagePackDecodable>(_ type: T.Type, at index: Int) throws -> T {
        try decode(T.self, at: index)
    }

    private func decodeJSON<T: JSONDecodable>(_ type: T.Type, at index: Int) throws -> T {
        try decode(T.self, at: index)
    }
}

extension EncodedValue {
    /// The value as a `T`, by `T`'s fast path for this encoding if it has one.
    func decodeByItsFastPath<T: Decodable>(_ type: T.Type) throws -> T {
        switch encoding {
        case .messagePack:
            if let fast = T.self as? any MessagePackDecodable.Type, let value = try decodeMessagePack(fast) as? T {
                return value
            }
        case .json:
            if let fast = T.self as? any JSONDecodable.Type, let value = try decodeJSON(fast) as? T {
                return value
            }
        }
        return try decode(T.self)
    }

    private func decodeMessagePack<T: MessagePackDecodable>(_ type: T.Type) throws -> T {
        try decode(T.self)
    }

    private func decodeJSON<T: JSONDecodable>(_ type: T.Type) throws -> T {
        try decode(T.self)
    }
}
