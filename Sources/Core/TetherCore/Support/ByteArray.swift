extension Array where Element == UInt8 {
    /// Appends a copy of the bytes in `span`: one capacity check and a `memcpy` into the new
    /// space (`append(contentsOf:)` goes through the generic sequence path, several times the
    /// cost for the short strings and keys of a message).
    @inlinable
    @_spi(TetherInternal) public mutating func append(copying span: Span<UInt8>) {
        let count = span.count
        guard count > 0 else { return }
        append(addingCapacity: count) { output in
            unsafe output.withUnsafeMutableBufferPointer { buffer, initialized in
                unsafe span.withUnsafeBufferPointer { source in
                    unsafe buffer.baseAddress!.initialize(from: source.baseAddress!, count: count)
                }
                initialized = count
            }
        }
    }
}
