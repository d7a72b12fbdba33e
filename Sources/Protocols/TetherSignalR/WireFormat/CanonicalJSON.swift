import TetherCore
import TetherJSON
public import TetherMessagePack

/// Renders hub messages, handshakes and payload values as compact, canonical JSON text, whatever
/// protocol they came in: for logs, debugging tools (`tether decode`) and tests.
///
/// A message renders with the JSON hub protocol's property names in its canonical order
/// (`type`, `headers` if non-empty, `invocationId` if present, `target`, `arguments`, `streamIds`
/// if present, `item`, `result`, `error`, `allowReconnect` if true, `sequenceId`); headers are
/// sorted by name. MessagePack payloads are converted as `appendMessagePack` describes.
public enum CanonicalJSON {
    /// Why a value has no JSON rendering.
    public struct RenderingError: Error, Hashable, Sendable, CustomStringConvertible {
        /// The text.
        public let message: String

        public var description: String { message }

        static let keysNestedTooDeeply = RenderingError(
            message: "Map keys that are maps or arrays are nested too deeply to render as JSON."
        )
    }

    /// How deeply MessagePack map keys that are themselves maps or arrays may nest in one another.
    /// Such a key renders as its JSON text in a JSON string, so each level escapes the text of
    /// the level inside it once more and doubles its backslashes: `n` levels grow like 2^n, and
    /// a 125-byte value could otherwise render to gigabytes. 4 keeps any rendering within about
    /// 16 times the value's size.
    public static let maximumKeyNesting = 4

    /// The canonical JSON text of a hub message.
    public static func render(_ message: HubMessage) throws(RenderingError) -> String {
        var out: [UInt8] = []
        try JSONHubMessageWriter.write(message, into: &out, payloads: converting)
        return String(decoding: out, as: UTF8.self)
    }

    /// Writes payloads of either encoding as compact JSON.
    static let converting = JSONHubMessageWriter.PayloadWriter<RenderingError>(
        value: { (value, out) throws(RenderingError) in try Self.value(value, &out) },
        arguments: { (arguments, out) throws(RenderingError) in
            out.append(UInt8(ascii: "["))
            for (index, argument) in arguments.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                try Self.value(argument, &out)
            }
            out.append(UInt8(ascii: "]"))
        }
    )

    /// The canonical JSON text of a payload value.
    public static func render(_ value: EncodedValue) throws(RenderingError) -> String {
        var out: [UInt8] = []
        try Self.value(value, &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// A payload value as compact JSON: JSON values lose their insignificant whitespace,
    /// MessagePack values are converted (see `appendMessagePack`).
    static func value(_ value: EncodedValue, _ out: inout [UInt8]) throws(RenderingError) {
        switch value.encoding {
        case .json:
            var inString = false
            var escaped = false
            for byte in value.bytes {
                if inString {
                    if escaped {
                        escaped = false
                    } else if byte == UInt8(ascii: "\\") {
                        escaped = true
                    } else if byte == UInt8(ascii: "\"") {
                        inString = false
                    }
                } else if byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 {
                    continue
                } else if byte == UInt8(ascii: "\"") {
                    inString = true
                }
                out.append(byte)
            }
        case .messagePack:
            var reader = MessagePackReader(Array(value.bytes))
            // The value was validated when its message was parsed.
            if let tree = try? reader.readValue() { try appendMessagePack(tree, to: &out) }
        }
    }

    /// MessagePack → JSON: bin → base64 string; ext → {"ext":TYPE,"data":"BASE64"}; timestamp →
    /// {"timestamp":SECONDS,"nanoseconds":N}; float32 → the number; non-string map keys → their
    /// JSON text as the key; NaN and infinities (which JSON cannot express) → "NaN", "Infinity",
    /// "-Infinity" strings. Keys that are maps or arrays may nest `maximumKeyNesting` deep.
    public static func appendMessagePack(_ value: MessagePackValue, to out: inout [UInt8]) throws(RenderingError) {
        try append(value, to: &out, keyNesting: 0)
    }

    private static func append(
        _ value: MessagePackValue,
        to out: inout [UInt8],
        keyNesting: Int
    ) throws(RenderingError) {
        switch value {
        case .nil: out.append(contentsOf: "null".utf8)
        case .bool(let flag): out.append(contentsOf: (flag ? "true" : "false").utf8)
        case .int(let number): JSONText.appendInteger(number, to: &out)
        case .uint(let number): JSONText.appendInteger(number, to: &out)
        case .float(let number):
            if number.isFinite { JSONText.appendFloat(number, to: &out) } else { nonFinite(Double(number), &out) }
        case .double(let number):
            if number.isFinite { JSONText.appendDouble(number, to: &out) } else { nonFinite(number, &out) }
        case .string(let text): JSONText.appendString(text, to: &out)
        case .binary(let bytes): JSONText.appendString(Base64.encode(bytes), to: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                try append(element, to: &out, keyNesting: keyNesting)
            }
            out.append(UInt8(ascii: "]"))
        case .map(let pairs):
            out.append(UInt8(ascii: "{"))
            for (index, pair) in pairs.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                if case .string(let key) = pair.key {
                    JSONText.appendString(key, to: &out)
                } else {
                    var keyText: [UInt8] = []
                    switch pair.key {
                    case .map, .array:
                        guard keyNesting < maximumKeyNesting else { throw .keysNestedTooDeeply }
                        try append(pair.key, to: &keyText, keyNesting: keyNesting + 1)
                    default:
                        try append(pair.key, to: &keyText, keyNesting: keyNesting)
                    }
                    JSONText.appendString(String(decoding: keyText, as: UTF8.self), to: &out)
                }
                out.append(UInt8(ascii: ":"))
                try append(pair.value, to: &out, keyNesting: keyNesting)
            }
            out.append(UInt8(ascii: "}"))
        case .extension(let type, let data):
            out.append(contentsOf: #"{"ext":"#.utf8)
            JSONText.appendInteger(Int64(type), to: &out)
            out.append(contentsOf: #","data":"#.utf8)
            JSONText.appendString(Base64.encode(data), to: &out)
            out.append(UInt8(ascii: "}"))
        case .timestamp(let timestamp):
            out.append(contentsOf: #"{"timestamp":"#.utf8)
            JSONText.appendInteger(timestamp.seconds, to: &out)
            out.append(contentsOf: #","nanoseconds":"#.utf8)
            JSONText.appendInteger(UInt64(timestamp.nanoseconds), to: &out)
            out.append(UInt8(ascii: "}"))
        }
    }

    static func nonFinite(_ number: Double, _ out: inout [UInt8]) {
        let text = number.isNaN ? "NaN" : (number > 0 ? "Infinity" : "-Infinity")
        JSONText.appendString(text, to: &out)
    }

    /// `{"error":"TEXT"}`.
    public static func renderError(_ message: String) -> String {
        var out: [UInt8] = Array(#"{"error":"#.utf8)
        JSONText.appendString(message, to: &out)
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    /// `{"protocol":"NAME","version":N}`.
    public static func render(_ request: HandshakeRequest) -> String {
        var out: [UInt8] = Array(#"{"protocol":"#.utf8)
        JSONText.appendString(request.protocolName, to: &out)
        out.append(contentsOf: #","version":"#.utf8)
        JSONText.appendInteger(Int64(request.version), to: &out)
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    /// `{}`, or `{"error":"TEXT"}`, plus `minorVersion` when present.
    public static func render(_ response: HandshakeResponse) -> String {
        var out: [UInt8] = [UInt8(ascii: "{")]
        if let error = response.error {
            out.append(contentsOf: #""error":"#.utf8)
            JSONText.appendString(error, to: &out)
        }
        if let minorVersion = response.minorVersion {
            if response.error != nil { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: #""minorVersion":"#.utf8)
            JSONText.appendInteger(Int64(minorVersion), to: &out)
        }
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }
}
