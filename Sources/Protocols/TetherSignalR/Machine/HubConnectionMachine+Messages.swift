public import TetherCore

extension HubConnectionMachine {
    // MARK: - Sending

    /// Encodes and sends `message` on the live connection's WebSocket, numbering and buffering it
    /// under stateful reconnect. While the WebSocket is being reopened (`resuming`), a sequenced
    /// message is only buffered (the replay after the Sequence message sends it) and other
    /// messages are dropped.
    mutating func send(_ message: HubMessage, live: inout LiveConnection, now: Instant) {
        var bytes: [UInt8] = []
        if case .ping = message {
            bytes = hubProtocol.encodedPing
        } else {
            hubProtocol.write(message, into: &bytes)
        }
        if message.isSequenced { live.link.stateful?.sent(bytes) }
        if case .ping = message {} else { health.messagesSent += 1 }
        guard let generation = live.generation else { return }
        enqueue(.send(bytes, generation: generation))
        live.link.heartbeat.didSend(at: now)
        if let deadline = live.link.heartbeat.nextDeadline { timers.set(.liveness, at: deadline) }
    }

    /// The live connection an app command runs on, taken out of the state (put it back with
    /// `restore(_:)`): while resuming (stateful reconnect) commands are taken and buffered, then
    /// replayed on the reopened WebSocket, as the official clients do. Throws `notConnected`
    /// otherwise, and `sendQueueFull` when a sequenced message would overfill the stateful buffer.
    mutating func takeLiveForCommand(sequenced: Bool = true) throws(HubConnectionError) -> LiveConnection {
        guard let live = takeLive() else { throw .notConnected }
        if sequenced, let stateful = live.link.stateful, !stateful.hasRoom {
            restore(live)
            throw HubConnectionError(.sendQueueFull, "The stateful-reconnect send buffer is full.")
        }
        return live
    }

    mutating func makeInvocationId() -> String {
        defer { nextInvocationId += 1 }
        return String(nextInvocationId)
    }

    /// The connection's value encoding (JSON or MessagePack, from its hub protocol).
    public var valueEncoding: ValueEncoding { hubProtocol.valueEncoding }

    /// `values` encoded as arguments in the connection's own encoding.
    func encodeArguments<each Argument: Encodable>(
        _ values: repeat each Argument
    ) throws(HubConnectionError) -> EncodedArguments {
        try Self.encodeArguments(repeat each values, as: valueEncoding)
    }

    /// `values` encoded as arguments in `encoding`; an `encoding` error when one cannot be.
    package static func encodeArguments<each Argument: Encodable>(
        _ values: repeat each Argument,
        as encoding: ValueEncoding
    ) throws(HubConnectionError) -> EncodedArguments {
        do {
            return try EncodedArguments(encoding: encoding, repeat each values)
        } catch {
            throw HubConnectionError(.encoding, "The arguments cannot be encoded: \(error)")
        }
    }

    /// Throws unless `arguments` are in the connection's encoding (a JSON value cannot go on a
    /// MessagePack connection, nor the reverse).
    func check(_ encoding: ValueEncoding) throws(HubConnectionError) {
        guard encoding == valueEncoding else {
            throw HubConnectionError(
                .encoding,
                "The values are encoded as \(encoding), but this connection speaks \(valueEncoding)."
            )
        }
    }

    /// Calls `target` with `arguments` (any `Encodable` values, encoded with the connection's
    /// protocol) and expects one result, reported as `completion(invocationId:result:)`; returns
    /// the invocation id.
    public mutating func invoke<each Argument: Encodable>(
        _ target: String,
        _ arguments: repeat each Argument,
        now: Instant
    ) throws(HubConnectionError) -> String {
        try invoke(target, arguments: encodeArguments(repeat each arguments), now: now)
    }

    /// Calls `target` without expecting a result, with any `Encodable` arguments.
    public mutating func send<each Argument: Encodable>(
        _ target: String,
        _ arguments: repeat each Argument,
        now: Instant
    ) throws(HubConnectionError) {
        try send(target, arguments: encodeArguments(repeat each arguments), now: now)
    }

    /// Calls the streaming method `target` with any `Encodable` arguments.
    public mutating func stream<each Argument: Encodable>(
        _ target: String,
        _ arguments: repeat each Argument,
        now: Instant
    ) throws(HubConnectionError) -> String {
        try stream(target, arguments: encodeArguments(repeat each arguments), now: now)
    }

    /// Answers a server invocation with an `Encodable` result.
    public mutating func reply(to invocationId: String, value: some Encodable, now: Instant) throws(HubConnectionError)
    {
        let encoded: EncodedValue
        do {
            encoded = try EncodedValue(value, encoding: valueEncoding)
        } catch {
            throw HubConnectionError(.encoding, "The result cannot be encoded: \(error)")
        }
        try reply(to: invocationId, result: .value(encoded), now: now)
    }

    /// Calls `target` and expects one result, reported as `completion(invocationId:result:)`;
    /// returns the invocation id. `streamIds` name upload streams from `makeUploadStream()`.
    public mutating func invoke(
        _ target: String,
        arguments: EncodedArguments,
        streamIds: [String] = [],
        now: Instant
    ) throws(HubConnectionError) -> String {
        try startCall(.invocation, target, arguments, streamIds, now: now)
    }

    /// Calls `target` without expecting a result (a non-blocking invocation).
    public mutating func send(
        _ target: String,
        arguments: EncodedArguments,
        streamIds: [String] = [],
        now: Instant
    ) throws(HubConnectionError) {
        try check(arguments.encoding)
        var live = try takeLiveForCommand()
        defer { restore(live) }
        let message = InvocationMessage(
            target: target,
            arguments: arguments,
            streamIds: streamIds.isEmpty ? nil : streamIds
        )
        send(.invocation(message), live: &live, now: now)
    }

    /// Calls the streaming method `target`; items arrive as `streamItem`, the end as
    /// `streamCompleted`. Returns the stream's invocation id.
    public mutating func stream(
        _ target: String,
        arguments: EncodedArguments,
        streamIds: [String] = [],
        now: Instant
    ) throws(HubConnectionError) -> String {
        try startCall(.stream, target, arguments, streamIds, now: now)
    }

    /// Sends a call that the server answers (`kind`: an invocation or a stream), under a new
    /// invocation id (used up only when the call is sent) that it returns.
    private mutating func startCall(
        _ kind: Pending,
        _ target: String,
        _ arguments: EncodedArguments,
        _ streamIds: [String],
        now: Instant
    ) throws(HubConnectionError) -> String {
        try check(arguments.encoding)
        var live = try takeLiveForCommand()
        defer { restore(live) }
        let id = makeInvocationId()
        live.link.pending[id] = kind
        let uploads = streamIds.isEmpty ? nil : streamIds
        let message: HubMessage
        if kind == .invocation {
            live.link.invocationSentAt[id] = now
            message = .invocation(
                InvocationMessage(invocationId: id, target: target, arguments: arguments, streamIds: uploads)
            )
        } else {
            message = .streamInvocation(
                StreamInvocationMessage(invocationId: id, target: target, arguments: arguments, streamIds: uploads)
            )
        }
        send(message, live: &live, now: now)
        return id
    }

    /// Cancels a server→client stream: sends CancelInvocation and reports the stream completed
    /// (later items and its Completion are ignored).
    public mutating func cancelStream(_ invocationId: String, now: Instant) throws(HubConnectionError) {
        var live = try takeLiveForCommand()
        defer { restore(live) }
        guard live.link.pending[invocationId] == .stream else { return }
        live.link.pending[invocationId] = .canceledStream
        send(.cancelInvocation(CancelInvocationMessage(invocationId: invocationId)), live: &live, now: now)
        enqueue(.event(.streamCompleted(invocationId: invocationId, error: nil)))
    }

    /// A new client→server stream id, to pass in an invocation's `streamIds`. Throws
    /// `sendQueueFull` when that invocation could not go out now (the stateful buffer is full), so
    /// that a command retried until there is room makes no stream per try.
    public mutating func makeUploadStream(now: Instant) throws(HubConnectionError) -> String {
        var live = try takeLiveForCommand()
        defer { restore(live) }
        let id = makeInvocationId()
        live.link.uploads.insert(id)
        return id
    }

    /// Sends one item of an upload stream.
    public mutating func sendStreamItem(_ streamId: String, item: EncodedValue, now: Instant) throws(HubConnectionError)
    {
        try check(item.encoding)
        var live = try takeLiveForCommand()
        defer { restore(live) }
        guard live.link.uploads.contains(streamId) else { throw .unknownUploadStream(streamId) }
        send(.streamItem(StreamItemMessage(invocationId: streamId, item: item)), live: &live, now: now)
    }

    /// Ends an upload stream (with an error text, or normally).
    public mutating func completeUploadStream(
        _ streamId: String,
        error: String? = nil,
        now: Instant
    ) throws(HubConnectionError) {
        var live = try takeLiveForCommand()
        defer { restore(live) }
        guard live.link.uploads.remove(streamId) != nil else { throw .unknownUploadStream(streamId) }
        let result: CompletionResult = error.map { .error($0) } ?? .void
        send(.completion(CompletionMessage(invocationId: streamId, result: result)), live: &live, now: now)
    }

    /// Answers a server invocation that expects a result (a client result).
    public mutating func reply(
        to invocationId: String,
        result: CompletionResult,
        now: Instant
    ) throws(HubConnectionError) {
        if case .value(let value) = result { try check(value.encoding) }
        var live = try takeLiveForCommand()
        defer { restore(live) }
        guard live.link.serverInvocations.remove(invocationId) != nil else {
            throw HubConnectionError(.unknownInvocation, "No server invocation '\(invocationId)' awaits a reply.")
        }
        send(.completion(CompletionMessage(invocationId: invocationId, result: result)), live: &live, now: now)
    }

    // MARK: - Receiving

    /// Parses and handles `count` received bytes on the connected session, which `append` gives
    /// to the parser.
    mutating func processReceived(count: Int, now: Instant, _ append: (inout AnyHubMessageParser) -> Void) {
        guard case .connected = state, var live = takeLive() else { return }
        health.bytesReceived += count
        live.link.heartbeat.didReceive(at: now)
        if let deadline = live.link.heartbeat.nextDeadline { timers.set(.liveness, at: deadline) }
        append(&live.link.parser)
        while true {
            var next: HubMessage?
            do {
                next = try live.link.parser.next()
            } catch {
                return violation(live, error.message, now: now)
            }
            guard let message = next.take() else { break }
            if case .ping = message {} else { health.messagesReceived += 1 }
            if live.link.stateful != nil {
                if message.isSequenced {
                    let process = live.link.stateful!.shouldProcessReceived()
                    if !timers.isArmed(.ack), live.link.stateful!.needsAck {
                        timers.set(.ack, at: now + configuration.ackDelay)
                    }
                    if !process { continue }
                } else if live.link.stateful!.waitingForSequence, case .sequence = message {
                    // handled below
                } else if live.link.stateful!.waitingForSequence {
                    continue
                }
            }
            // The connection ended (a transition replaced the state): nothing to put back.
            guard handle(message, live: &live, now: now) else { return }
        }
        restore(live)
    }

    static let tooManyClientResults = "Too many client results are pending."

    /// Handles one message of the connected `live` connection; returns false when the connection
    /// ended (the state then is the one that followed, and `live` is spent).
    mutating func handle(_ message: consuming HubMessage, live: inout LiveConnection, now: Instant) -> Bool {
        switch consume message {
        case .invocation(let invocation):
            if let handler = handler(for: invocation.target) {
                if let id = invocation.invocationId {
                    guard live.link.serverInvocations.count < configuration.maximumPendingClientResults else {
                        let reply = CompletionMessage(invocationId: id, result: .error(Self.tooManyClientResults))
                        send(.completion(reply), live: &live, now: now)
                        break
                    }
                    live.link.serverInvocations.insert(id)
                }
                enqueue(.event(.invocation(invocation, handler: handler)))
            } else {
                if let id = invocation.invocationId {
                    let reply = CompletionMessage(invocationId: id, result: .error("Client didn't provide a result."))
                    send(.completion(reply), live: &live, now: now)
                }
                enqueue(.event(.unhandledInvocation(invocation)))
            }
        case .streamItem(let item):
            switch live.link.pending[item.invocationId] {
            case .stream: enqueue(.event(.streamItem(invocationId: item.invocationId, item: item.item)))
            case .canceledStream: break
            case .invocation, nil:
                violation(live, "Received a StreamItem for unknown stream '\(item.invocationId)'.", now: now)
                return false
            }
        case .completion(let completion):
            if let sent = live.link.invocationSentAt.removeValue(forKey: completion.invocationId) {
                health.roundTrip(now - sent)
            }
            switch live.link.pending.removeValue(forKey: completion.invocationId) {
            case .invocation:
                let result: Result<EncodedValue?, HubConnectionError> =
                    switch completion.result {
                    case .void: .success(nil)
                    case .value(let value): .success(value)
                    case .error(let text): .failure(HubConnectionError(.invocationFailed, text))
                    }
                enqueue(.event(.completion(invocationId: completion.invocationId, result: result)))
            case .stream:
                var error: HubConnectionError?
                if case .error(let text) = completion.result { error = HubConnectionError(.invocationFailed, text) }
                enqueue(.event(.streamCompleted(invocationId: completion.invocationId, error: error)))
            case .canceledStream:
                break
            case nil:
                violation(
                    live,
                    "Received a Completion for unknown invocation '\(completion.invocationId)'.",
                    now: now
                )
                return false
            }
        case .streamInvocation, .cancelInvocation, .ping:
            // Servers do not stream from clients or cancel them through these; pings only prove liveness.
            break
        case .close(let close):
            let error = HubConnectionError(
                .serverClosed,
                close.error.map { "Server returned an error on close: " + $0 } ?? "The server closed the connection."
            )
            enqueue(.closeTransport(generation: live.session.generation))
            connectionLost(live, error: error, allowReconnect: close.allowReconnect, now: now, resumable: false)
            return false
        case .ack(let sequenceId):
            if live.link.stateful?.acknowledged(upTo: sequenceId) == true {
                enqueue(.event(.sendBufferAvailable))
            }
        case .sequence(let sequenceId):
            if live.link.stateful?.peerSequence(sequenceId) == false {
                violation(live, "Sequence ID greater than amount of messages we've received.", now: now)
                return false
            }
        }
        return true
    }

    /// The registered name that handles `target` (matched case-insensitively), or nil.
    mutating func handler(for target: String) -> String? {
        // Targets are interned by the parsers, so a repeat is usually the very same string, and a
        // hub pushes a handful of targets: the last few are checked by identity (the string's
        // representation, bit for bit: equal strings whenever it matches, and a mismatch costs no
        // comparison of the texts) before the cache, whose lookup hashes the string.
        for index in recentTargets.indices where Self.isSameString(recentTargets[index].target, target) {
            return recentTargets[index].handler
        }
        let handler: String?
        if let known = handledCache[target] {
            handler = known
        } else {
            handler = handledTargets[target.lowercased()]
            if handledCache.count < 256 { handledCache[target] = handler }
        }
        if recentTargets.count < Self.recentTargetCount {
            recentTargets.append((target, handler))
        } else {
            recentTargets[nextRecentTarget] = (target, handler)
            nextRecentTarget = (nextRecentTarget + 1) % Self.recentTargetCount
        }
        return handler
    }

    /// Whether `a` and `b` have the same representation (the same storage, or the same small
    /// string's bits): then they are equal. Different representations may still be equal texts.
    static func isSameString(_ a: String, _ b: String) -> Bool {
        unsafe withUnsafeBytes(of: a) { a in unsafe withUnsafeBytes(of: b) { b in unsafe a.elementsEqual(b) } }
    }

    /// How many recent targets `handler(for:)` checks before its cache.
    static let recentTargetCount = 8

    /// The server broke the protocol: tell it why with a Close message (the protocol's closing
    /// bytes), close the transport and treat the connection as lost.
    mutating func violation(_ live: LiveConnection, _ message: String, now: Instant) {
        var live = live
        send(.close(CloseMessage(error: message)), live: &live, now: now)
        enqueue(.closeTransport(generation: live.session.generation))
        connectionLost(
            live,
            error: HubConnectionError(.protocolViolation, message),
            allowReconnect: true,
            now: now,
            resumable: false
        )
    }
}
