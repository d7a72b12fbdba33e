/// Standard base64 (RFC 4648 §4, with padding), as used to show binary data in JSON text.
package enum Base64 {
    private static let alphabet: [UInt8] = Array(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8
    )

    /// Appends the base64 encoding of `bytes` to `output`.
    package static func encode(_ bytes: some Collection<UInt8>, into output: inout [UInt8]) {
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
    package static func encode(_ bytes: some Collection<UInt8>) -> String {
        var output: [UInt8] = []
        encode(bytes, into: &output)
        return String(decoding: output, as: UTF8.self)
    }
}

extension Base64 {
    /// The bytes that the standard base64 text `text` encodes (RFC 4648 §4); nil if it is not
    /// valid base64 (a character outside the alphabet, a length that is not a multiple of four,
    /// misplaced padding, or non-zero bits after the last byte). No whitespace is accepted.
    package static func decode(_ text: some StringProtocol) -> [UInt8]? {
        decode(Array(text.utf8))
    }

    /// The bytes that the base64 text in `encoded` encodes; nil if it is not valid base64.
    package static func decode(_ encoded: [UInt8]) -> [UInt8]? {
        guard encoded.count % 4 == 0 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(encoded.count / 4 * 3)
        var index = 0
        while index < encoded.count {
            let isLast = index + 4 == encoded.count
            var values: (UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0)
            var padding = 0
            for offset in 0..<4 {
                let byte = encoded[index + offset]
                let value: UInt8
                if byte == UInt8(ascii: "=") {
                    // Padding only in the last group's last two places, and nothing after it.
                    guard isLast, offset >= 2 else { return nil }
                    padding += 1
                    value = 0
                } else {
                    guard padding == 0, let decoded = sextet(byte) else { return nil }
                    value = decoded
                }
                switch offset {
                case 0: values.0 = value
                case 1: values.1 = value
                case 2: values.2 = value
                default: values.3 = value
                }
            }
            output.append(values.0 << 2 | values.1 >> 4)
            switch padding {
            case 0:
                output.append((values.1 & 0x0F) << 4 | values.2 >> 2)
                output.append((values.2 & 0x03) << 6 | values.3)
            case 1:
                guard values.2 & 0x03 == 0 else { return nil }
                output.append((values.1 & 0x0F) << 4 | values.2 >> 2)
            default:
                guard values.1 & 0x0F == 0 else { return nil }
            }
            index += 4
        }
        return output
    }

    private static func sextet(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): byte - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): byte - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): 62
        case UInt8(ascii: "/"): 63
        default: nil
        }
    }
}
