public import TetherSignalR

/// What a parser made of a byte stream: the messages in order, then the error that stopped it
/// (if any).
public struct ParseOutcome: Equatable {
    public var messages: [HubMessage] = []
    public var error: HubProtocolError?
}

/// Feeds `pieces` to a fresh parser of `hubProtocol`, pulling every message after each piece,
/// until the first error.
public func parse<P: HubProtocol>(_ hubProtocol: P, _ pieces: [ArraySlice<UInt8>]) -> ParseOutcome {
    var parser = hubProtocol.makeParser()
    var outcome = ParseOutcome()
    for piece in pieces {
        parser.append(piece)
        do {
            while let message = try parser.next() { outcome.messages.append(message) }
        } catch {
            outcome.error = error
            // A failed parser stays failed, with the same error.
            do {
                _ = try parser.next()
                require(false, "a failed parser returned a message")
            } catch let again {
                require(again == error, "a failed parser changed its error: \(error) then \(again)")
            }
            return outcome
        }
    }
    return outcome
}

/// The invariants of a hub protocol on one input: any split of the stream gives the same
/// messages and the same error as the whole stream; every message it yields is written back
/// as one record that parses to a message written with the very same bytes (encode(decode(x))
/// is stable); a binder reading every payload as it is read changes neither the messages nor the
/// error; rendering and decoding payloads never crash.
public func checkHubProtocol<P: HubProtocol>(_ hubProtocol: P, _ input: [UInt8], seed: UInt8) {
    let whole = parse(hubProtocol, [input[...]])
    let split = parse(hubProtocol, chunks(of: input, seed: seed))
    require(
        whole == split,
        "a split of the stream parsed differently (seed \(seed)): whole \(whole.messages.count) messages, "
            + "error \(String(describing: whole.error)); split \(split.messages.count) messages, "
            + "error \(String(describing: split.error))"
    )
    // A binder reading every payload in the same pass accepts exactly what `next()` accepts.
    let bound = parseBound(hubProtocol, chunks(of: input, seed: seed))
    require(
        whole == bound,
        "binding the payloads parsed differently (seed \(seed)): \(whole.messages.count) messages, error "
            + "\(String(describing: whole.error)); bound \(bound.messages.count) messages, error "
            + "\(String(describing: bound.error))"
    )
    for message in whole.messages {
        var written: [UInt8] = []
        hubProtocol.write(message, into: &written)
        let reparsed = parse(hubProtocol, [written[...]])
        require(reparsed.error == nil, "a written message does not parse: \(String(describing: reparsed.error))")
        require(reparsed.messages.count == 1, "a written message parsed as \(reparsed.messages.count) messages")
        var rewritten: [UInt8] = []
        hubProtocol.write(reparsed.messages[0], into: &rewritten)
        require(rewritten == written, "writing a parsed message is not stable")
        _ = try? CanonicalJSON.render(message)
        if case .invocation(let invocation) = message {
            for argument in invocation.arguments { _ = try? argument.decode([String: String].self) }
        }
    }
}

/// Any JSON or MessagePack value, read by hand through the fast paths' readers (each kind tried
/// in turn, mismatches caught), as a binder reading unknown values would.
indirect enum FuzzTree: JSONDecodable, MessagePackDecodable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([FuzzTree])
    case object([String: FuzzTree])
    case other

    init(json reader: inout JSONReader) throws {
        if reader.readNilIfPresent() {
            self = .null
        } else if (try? reader.readObjectStart()) != nil {
            var members: [String: FuzzTree] = [:]
            while reader.nextMember() { members[try reader.readMemberName()] = try FuzzTree(json: &reader) }
            self = .object(members)
        } else if (try? reader.readArrayStart()) != nil {
            var elements: [FuzzTree] = []
            while reader.nextElement() { elements.append(try FuzzTree(json: &reader)) }
            self = .array(elements)
        } else if let string = try? reader.readString() {
            self = .string(string)
        } else if let bool = try? reader.readBool() {
            self = .bool(bool)
        } else {
            self = .number(try reader.readDouble())
        }
    }

    init(messagePack reader: inout MessagePackReader) throws {
        _ = try reader.readValue()
        self = .other
    }

    init(from decoder: any Decoder) throws {
        self = .other
    }
}

/// Reads every payload value it is offered as a `FuzzTree`.
struct FuzzTreeBinder: HubMessageBinder {
    var read = 0

    mutating func bindArguments(of target: String, from arguments: inout HubPayloadReader) {
        while !arguments.isAtEnd, (try? arguments.read(FuzzTree.self)) != nil { read += 1 }
    }

    mutating func bindResult(of invocationId: String, from result: inout HubPayloadReader) {
        if (try? result.read(FuzzTree.self)) != nil { read += 1 }
    }

    mutating func bindItem(of invocationId: String, from item: inout HubPayloadReader) {
        if (try? item.read(FuzzTree.self)) != nil { read += 1 }
    }
}

/// `parse` through `next(binding:)`, with a binder that reads every payload by hand.
public func parseBound<P: HubProtocol>(_ hubProtocol: P, _ pieces: [ArraySlice<UInt8>]) -> ParseOutcome {
    var parser = hubProtocol.makeParser()
    var binder = FuzzTreeBinder()
    var outcome = ParseOutcome()
    for piece in pieces {
        parser.append(piece)
        do {
            while let message = try parser.next(binding: &binder) { outcome.messages.append(message) }
        } catch {
            outcome.error = error
            return outcome
        }
    }
    return outcome
}
