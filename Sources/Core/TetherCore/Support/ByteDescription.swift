/// Short, readable renderings of byte buffers for `description`s and logs: UTF-8 text as it is
/// (cut after `limit` characters), anything else as hex (cut after `limit / 2` bytes).
package enum ByteDescription {
    /// `bytes` as text if they are valid UTF-8 without control characters other than tab, line
    /// breaks and the SignalR record separator (shown as `␞`), else as hex; with the byte count.
    package static func describe(_ bytes: some Collection<UInt8>, limit: Int = 200) -> String {
        let array = Array(bytes)
        let isText =
            String(validating: array, as: UTF8.self) != nil
            && array.allSatisfy { $0 >= 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D || $0 == 0x1E }
        if isText {
            let text = String(decoding: array, as: UTF8.self).replacing("\u{1E}", with: "␞")
            let shown = text.count > limit ? String(text.prefix(limit)) + "…" : text
            return "\(array.count) bytes: \(shown)"
        }
        let shown = array.prefix(max(1, limit / 2)).map { byte in
            (byte < 16 ? "0" : "") + String(byte, radix: 16)
        }
        return "\(array.count) bytes: " + shown.joined(separator: " ") + (array.count > limit / 2 ? " …" : "")
    }
}
