import TetherCore
import TetherJSON
import TetherMessagePack
import TetherSignalR
import TetherText

/// The application payload of the benchmark corpus (the motivating app's `ParamData`).
struct ParamData: Codable, Equatable {
    var id: String
    var userId: Int
    var niceName: String
    var time: Int64
    var dataType: String
    var jsonData: String
    var organizationCode: String
    var customerId: Int

    enum CodingKeys: String, CodingKey, CaseIterable, Sendable {
        case id = "Id"
        case userId = "UserId"
        case niceName = "NiceName"
        case time = "Time"
        case dataType = "DataType"
        case jsonData = "JsonData"
        case organizationCode = "OrganizationCode"
        case customerId = "CustomerId"
    }
}

/// ParamData read by hand from MessagePack, the fast path for hot types (no `Codable`
/// containers): what `signalr-msgpack-decode` measures; `signalr-msgpack-codable-decode` decodes
/// the same values through `init(from:)`.
extension ParamData: MessagePackDecodable {
    static let keys = CodingKeySet(CodingKeys.self)

    init(messagePack reader: inout MessagePackReader) throws {
        var id: String?
        var userId: Int?
        var niceName: String?
        var time: Int64?
        var dataType: String?
        var jsonData: String?
        var organizationCode: String?
        var customerId: Int?
        let keys = Self.keys
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey(in: keys) {
            case .id: id = try reader.readString()
            case .userId: userId = try reader.readInteger(Int.self)
            case .niceName: niceName = try reader.readString()
            case .time: time = try reader.readInt64()
            case .dataType: dataType = try reader.readString()
            case .jsonData: jsonData = try reader.readString()
            case .organizationCode: organizationCode = try reader.readString()
            case .customerId: customerId = try reader.readInteger(Int.self)
            case nil: try reader.skipValue()
            }
        }
        try self.init(
            id: id,
            userId: userId,
            niceName: niceName,
            time: time,
            dataType: dataType,
            jsonData: jsonData,
            organizationCode: organizationCode,
            customerId: customerId
        )
    }
}

/// ParamData written by hand to MessagePack (what `signalr-msgpack-encode` measures, and how the
/// corpus is written): a map in declaration order, as msgpack-python writes a dict.
extension ParamData: MessagePackEncodable {
    func encode(messagePack writer: inout MessagePackWriter) {
        let keys = Self.keys.keySet
        writer.writeMapHeader(count: 8)
        writer.writeKey(0, of: keys)
        writer.writeString(id)
        writer.writeKey(1, of: keys)
        writer.writeInt(Int64(userId))
        writer.writeKey(2, of: keys)
        writer.writeString(niceName)
        writer.writeKey(3, of: keys)
        writer.writeInt(time)
        writer.writeKey(4, of: keys)
        writer.writeString(dataType)
        writer.writeKey(5, of: keys)
        writer.writeString(jsonData)
        writer.writeKey(6, of: keys)
        writer.writeString(organizationCode)
        writer.writeKey(7, of: keys)
        writer.writeInt(Int64(customerId))
    }
}

extension ParamData {
    /// The ParamData of the fields a hand-written decoder found, or `keyNotFound` for the first
    /// one it did not.
    init(
        id: String?,
        userId: Int?,
        niceName: String?,
        time: Int64?,
        dataType: String?,
        jsonData: String?,
        organizationCode: String?,
        customerId: Int?
    ) throws {
        guard let id, let userId, let niceName, let time, let dataType, let jsonData, let organizationCode,
            let customerId
        else {
            let found =
                [id != nil, userId != nil, niceName != nil, time != nil, dataType != nil, jsonData != nil]
                + [organizationCode != nil, customerId != nil]
            throw Self.keys.missingKey(CodingKeys.allCases[found.firstIndex(of: false)!])
        }
        self.init(
            id: id,
            userId: userId,
            niceName: niceName,
            time: time,
            dataType: dataType,
            jsonData: jsonData,
            organizationCode: organizationCode,
            customerId: customerId
        )
    }
}

/// ParamData read by hand from JSON (what `signalr-json-decode` measures).
extension ParamData: JSONDecodable {
    init(json reader: inout JSONReader) throws {
        var id: String?
        var userId: Int?
        var niceName: String?
        var time: Int64?
        var dataType: String?
        var jsonData: String?
        var organizationCode: String?
        var customerId: Int?
        let keys = Self.keys
        try reader.readObjectStart()
        while reader.nextMember() {
            switch try reader.readKey(in: keys) {
            case .id: id = try reader.readString()
            case .userId: userId = try reader.readInteger(Int.self)
            case .niceName: niceName = try reader.readString()
            case .time: time = try reader.readInteger(Int64.self)
            case .dataType: dataType = try reader.readString()
            case .jsonData: jsonData = try reader.readString()
            case .organizationCode: organizationCode = try reader.readString()
            case .customerId: customerId = try reader.readInteger(Int.self)
            case nil: reader.skipValue()
            }
        }
        try self.init(
            id: id,
            userId: userId,
            niceName: niceName,
            time: time,
            dataType: dataType,
            jsonData: jsonData,
            organizationCode: organizationCode,
            customerId: customerId
        )
    }
}

/// ParamData written by hand as JSON (what `signalr-json-encode` measures): the members in
/// declaration order, as the `Codable` path writes them.
extension ParamData: JSONEncodable {
    func encode(json writer: inout JSONWriter) {
        let keys = Self.keys.keySet
        writer.writeObjectStart()
        writer.writeKey(0, of: keys)
        writer.writeString(id)
        writer.writeKey(1, of: keys)
        writer.writeInt(Int64(userId))
        writer.writeKey(2, of: keys)
        writer.writeString(niceName)
        writer.writeKey(3, of: keys)
        writer.writeInt(time)
        writer.writeKey(4, of: keys)
        writer.writeString(dataType)
        writer.writeKey(5, of: keys)
        writer.writeString(jsonData)
        writer.writeKey(6, of: keys)
        writer.writeString(organizationCode)
        writer.writeKey(7, of: keys)
        writer.writeInt(Int64(customerId))
        writer.writeObjectEnd()
    }
}

/// A `T` coded through `Codable` only (a wrapper that conforms to neither
/// `MessagePackDecodable` nor `MessagePackEncodable`), for measuring that path on a type that has
/// a faster one.
struct ViaCodable<T: Codable>: Codable {
    var value: T

    init(value: T) {
        self.value = value
    }

    init(from decoder: any Decoder) throws {
        value = try T(from: decoder)
    }

    func encode(to encoder: any Encoder) throws {
        try value.encode(to: encoder)
    }
}

/// The deterministic benchmark corpus (its shape: `Benchmarks/README.md`, "The corpus"): SignalR
/// messages as a JSON hub-protocol stream and as a MessagePack hub-protocol stream, the same
/// messages in both.
///
/// Mix by message count: 70 % Invocation (one ParamData argument, half of them with an id),
/// 10 % Completion with a ParamData result, 10 % StreamItem with a ParamData item, 10 % Ping;
/// 10 % of JSON records escape non-ASCII as \uXXXX.
struct SignalRCorpus {
    enum Kind { case invocation, completion, streamItem, ping }

    var json: [UInt8] = []
    var messagePack: [UInt8] = []
    var counts: [Kind: Int] = [:]
    var messageCount = 0
    /// Every message's ParamData, in order (none for pings), for the encode benchmarks.
    var payloads: [ParamData] = []
    /// Every message's shape, for rebuilding it in the encode benchmarks.
    var shapes: [(kind: Kind, invocationId: String?, target: String)] = []

    static let first = [
        "Alice", "Bob", "Carol", "Dave", "Zoë", "Łukasz", "José", "Søren", "Ærin", "李雷", "Мария", "محمد", "Ngọc",
        "O'Brien", "Dwayne \"Rock\"", "back\\slash", "Émilie", "Jürgen", "Ольга", "さくら", "😀 Smiley", "Tab\tName",
    ]
    static let last = [
        "Smith", "Müller", "Nowak", "García", "Øvergaard", "王", "Иванов", "Kowalczyk", "D'Angelo", "Nguyễn", "Ó Briain",
        "",
    ]
    static let words = [
        "hello", "there", "meeting", "at", "3pm", "ok", "👍", "thanks!", "see", "you", "soon", "café", "naïve", "über",
        "日本語",
        "テスト", "привет", "мир", "ção", "\"quoted\"", "back\\slash", "<tag>", "a&b", "line\nbreak", "tab\tsep", "50%",
        "{braces}", "[brackets]", "emoji🎉", "€100", "ß", "ø", "x", "lorem", "ipsum", "dolor", "sit", "amet",
        "consectetur",
        "adipiscing", "elit",
    ]
    static let dataTypes = ["chat", "notification", "typing", "receipt", "file", "system"]
    static let organizations = ["ORG1", "ACME", "Contoso", "Fabrikam-ÆØÅ", "北京公司", "Initech"]
    static let targets = ["ReceiveMessage", "ReceiveNotification", "UserTyping", "MessageRead", "ReceiveMessages"]

    /// Generates messages until the JSON stream reaches `targetBytes`.
    init(targetBytes: Int, seed: UInt64 = 20_240_601) {
        var rng = SeededRandomNumberGenerator(seed: seed)
        var invocationCounter = 0
        var index = 0
        var frame = MessagePackWriter()
        while json.count < targetBytes {
            let roll = Double.random(in: 0..<1, using: &rng)
            let asciiOnly = Double.random(in: 0..<1, using: &rng) < 0.1
            frame.bytes.removeAll(keepingCapacity: true)
            var record = PythonStyleJSONWriter(asciiOnly: asciiOnly)
            let kind: Kind
            if roll < 0.70 {
                kind = .invocation
                let payload = Self.paramData(&rng, index)
                let target = Self.targets.randomElement(using: &rng)!
                var id: String?
                if Bool.random(using: &rng) {
                    invocationCounter += 1
                    id = String(invocationCounter)
                }
                record.raw(#"{"type":1"#)
                if let id {
                    record.raw(#","invocationId":"#)
                    record.string(id)
                }
                record.raw(#","target":"#)
                record.string(target)
                record.raw(#","arguments":["#)
                record.paramData(payload)
                record.raw("]}")
                frame.writeArrayHeader(count: 6)
                frame.writeUInt(1)
                frame.writeMapHeader(count: 0)
                if let id { frame.writeString(id) } else { frame.writeNil() }
                frame.writeString(target)
                frame.writeArrayHeader(count: 1)
                payload.encode(messagePack: &frame)
                frame.writeArrayHeader(count: 0)
                payloads.append(payload)
                shapes.append((kind, id, target))
            } else if roll < 0.90 {
                kind = roll < 0.80 ? .completion : .streamItem
                invocationCounter += 1
                let id = String(invocationCounter)
                let payload = Self.paramData(&rng, index)
                record.raw(kind == .completion ? #"{"type":3,"invocationId":"# : #"{"type":2,"invocationId":"#)
                record.string(id)
                record.raw(kind == .completion ? #","result":"# : #","item":"#)
                record.paramData(payload)
                record.raw("}")
                frame.writeArrayHeader(count: kind == .completion ? 5 : 4)
                frame.writeUInt(kind == .completion ? 3 : 2)
                frame.writeMapHeader(count: 0)
                frame.writeString(id)
                if kind == .completion { frame.writeUInt(3) }
                payload.encode(messagePack: &frame)
                payloads.append(payload)
                shapes.append((kind, id, ""))
            } else {
                kind = .ping
                record.raw(#"{"type":6}"#)
                frame.writeArrayHeader(count: 1)
                frame.writeUInt(6)
                shapes.append((kind, nil, ""))
            }
            json.append(contentsOf: record.bytes)
            json.append(0x1E)
            messagePack.append(contentsOf: VarInt.encode(frame.bytes.count))
            messagePack.append(contentsOf: frame.bytes)
            counts[kind, default: 0] += 1
            messageCount += 1
            index += 1
        }
    }

    static func text(_ rng: inout SeededRandomNumberGenerator, _ range: ClosedRange<Int>) -> String {
        (0..<Int.random(in: range, using: &rng)).map { _ in words.randomElement(using: &rng)! }.joined(separator: " ")
    }

    static func paramData(_ rng: inout SeededRandomNumberGenerator, _ index: Int) -> ParamData {
        var inner = PythonStyleJSONWriter(asciiOnly: Double.random(in: 0..<1, using: &rng) < 0.3)
        inner.raw(#"{"text":"#)
        inner.string(text(&rng, 1...25))
        let roll = Double.random(in: 0..<1, using: &rng)
        if roll < 0.3 {
            inner.raw(#","mentions":["#)
            let mentions = (0..<Int.random(in: 1...4, using: &rng)).map { _ in
                String(Int.random(in: 1...99_999, using: &rng))
            }
            inner.raw(mentions.joined(separator: ","))
            inner.raw("]")
        } else if roll < 0.4 {
            inner.raw(#","attachment":{"name":"#)
            inner.string(words.randomElement(using: &rng)! + ".png")
            inner.raw(#","size":"# + String(Int.random(in: 1...10_000_000, using: &rng)) + "}")
        }
        inner.raw("}")
        let hex = String(UInt32.random(in: 0...UInt32.max, using: &rng), radix: 16)
        let id = String(repeating: "0", count: 8 - hex.count) + hex + "-" + String.hex4(index & 0xFFFF)
        let name = (first.randomElement(using: &rng)! + " " + last.randomElement(using: &rng)!).trimmingSpaces()
        let time: Int64 =
            Double.random(in: 0..<1, using: &rng) < 0.8
            ? 1_701_234_567 + Int64(index) : 1_701_234_567_000 + Int64(index) * 37
        return ParamData(
            id: id,
            userId: Int.random(in: 1...(1 << 31 - 1), using: &rng),
            niceName: name,
            time: time,
            dataType: dataTypes.randomElement(using: &rng)!,
            jsonData: String(decoding: inner.bytes, as: UTF8.self),
            organizationCode: organizations.randomElement(using: &rng)!,
            customerId: Int.random(in: 0...5000, using: &rng)
        )
    }
}

/// A JSON writer that spells text the way Python's `json.dumps(separators=(",", ":"))` does,
/// optionally with `ensure_ascii` (non-ASCII as \uXXXX, astral characters as surrogate pairs).
struct PythonStyleJSONWriter {
    var bytes: [UInt8] = []
    let asciiOnly: Bool

    init(asciiOnly: Bool) {
        self.asciiOnly = asciiOnly
    }

    mutating func raw(_ text: String) {
        bytes.append(contentsOf: text.utf8)
    }

    mutating func string(_ text: String) {
        guard asciiOnly else {
            JSONText.appendString(text, to: &bytes)
            return
        }
        var ascii = ""
        for unit in text.utf16 {
            if unit >= 0x80 {
                let hex = String(unit, radix: 16)
                ascii += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                ascii.unicodeScalars.append(Unicode.Scalar(unit)!)
            }
        }
        // Escape quotes, backslashes and control characters, but keep the \u escapes made above.
        var escaped: [UInt8] = []
        JSONText.appendString(ascii, to: &escaped)
        var index = 0
        while index < escaped.count {
            if escaped[index] == UInt8(ascii: "\\"), index + 2 < escaped.count,
                escaped[index + 1] == UInt8(ascii: "\\"),
                escaped[index + 2] == UInt8(ascii: "u")
            {
                bytes.append(UInt8(ascii: "\\"))
                index += 2
                continue
            }
            bytes.append(escaped[index])
            index += 1
        }
    }

    mutating func integer(_ value: Int64) {
        JSONText.appendInteger(value, to: &bytes)
    }

    mutating func paramData(_ value: ParamData) {
        raw(#"{"Id":"#)
        string(value.id)
        raw(#","UserId":"#)
        integer(Int64(value.userId))
        raw(#","NiceName":"#)
        string(value.niceName)
        raw(#","Time":"#)
        integer(value.time)
        raw(#","DataType":"#)
        string(value.dataType)
        raw(#","JsonData":"#)
        string(value.jsonData)
        raw(#","OrganizationCode":"#)
        string(value.organizationCode)
        raw(#","CustomerId":"#)
        integer(Int64(value.customerId))
        raw("}")
    }
}

extension String {
    static func hex4(_ value: Int) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: Swift.max(0, 4 - digits.count)) + digits
    }

    func trimmingSpaces() -> String {
        var text = Substring(self)
        while text.first == " " { text = text.dropFirst() }
        while text.last == " " { text = text.dropLast() }
        return String(text)
    }
}
