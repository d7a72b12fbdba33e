/// Standard base64 (RFC 4648 §4, with padding), as used to show binary data in JSON text.
public enum Base64 {
    private static let alphabet: [UInt8] = Array(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8
    )

    /// Appends the base64 encoding of `bytes` to `output`.
    public static func encode(_ bytes: some Collection<UInt8>, into output: inout [UInt8]) {
        output.reserveCapacity(output.count + (bytes.count + 2) / 3 * 4)
        var iterator = bytes.makeIterator()
        while let b0 = iterator.next() {
            let b1 = iterator.next()
            let b2 = iterator.next()
            output.append(alphabet[Int(b0 >> 2)])
            output.append(alphabet[Int((b0 & 0x03) << 4 | (b1 ?? 0) >> 4)])
            if let b1 {
                output.append(alphabet[Int((b1 & 0x0F) << 2 | (b2 ?? 0) >> 6)])
            } else {
                output.append(UInt8(ascii: "="))
            }
            if let b2 {
                output.append(alphabet[Int(b2 & 0x3F)])
            } else {
                output.append(UInt8(ascii: "="))
            }
        }
    }

    /// The base64 encoding of `bytes` as a string.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        var output: [UInt8] = []
        encode(bytes, into: &output)
        return String(decoding: output, as: UTF8.self)
    }
}
