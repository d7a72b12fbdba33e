// What every fuzz target shares: reading the fuzzer's input as choices, splitting byte streams the
// way the fuzzer chooses, and failing loudly when an invariant breaks (libFuzzer records the
// input that made it fail).

/// The fuzzer's input read as a sequence of choices (its first bytes) followed by the payload.
public struct FuzzInput {
    public let bytes: [UInt8]
    public private(set) var position = 0

    public init(_ data: UnsafePointer<UInt8>, _ size: Int) {
        bytes = Array(unsafe UnsafeBufferPointer(start: data, count: size))
    }

    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Whether every byte has been taken.
    public var isAtEnd: Bool { position >= bytes.count }

    /// The next byte (0 past the end), as a choice.
    public mutating func byte() -> UInt8 {
        guard position < bytes.count else { return 0 }
        defer { position += 1 }
        return bytes[position]
    }

    /// The next two bytes as a number (0 past the end).
    public mutating func number() -> Int {
        Int(byte()) << 8 | Int(byte())
    }

    /// The next `count` bytes (fewer at the end).
    public mutating func take(_ count: Int) -> [UInt8] {
        let end = min(position + max(count, 0), bytes.count)
        defer { position = end }
        return Array(bytes[position..<end])
    }

    /// Every byte not yet taken.
    public mutating func rest() -> [UInt8] {
        defer { position = bytes.count }
        return Array(bytes[min(position, bytes.count)...])
    }
}

/// `bytes` cut into chunks whose sizes come from `seed` (a small generator, so that one choice
/// byte gives many different splits: single bytes, short runs, a cut in the middle).
public func chunks(of bytes: [UInt8], seed: UInt8) -> [ArraySlice<UInt8>] {
    var state = UInt64(seed) &* 0x9E37_79B9_7F4A_7C15 | 1
    var result: [ArraySlice<UInt8>] = []
    var offset = 0
    while offset < bytes.count {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        let size: Int
        switch seed & 3 {
        case 0: size = 1
        case 1: size = Int(state % 7) + 1
        case 2: size = Int(state % 64) + 1
        default: size = max(bytes.count / 2, 1)
        }
        let end = min(offset + size, bytes.count)
        result.append(bytes[offset..<end])
        offset = end
    }
    return result
}

/// Stops the run with `message` when `condition` is false: the fuzzer saves the input.
public func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("invariant broken: " + message()) }
}

/// Calls `body` with the bytes in an allocation of exactly their size, so that AddressSanitizer
/// reports a read one byte past the end.
public func withExactAllocation<R>(_ bytes: [UInt8], _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
    let exact = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(bytes.count, 1))
    defer { unsafe exact.deallocate() }
    _ = unsafe exact.initialize(fromContentsOf: bytes)
    return body(unsafe UnsafeBufferPointer(rebasing: exact[0..<bytes.count]))
}
