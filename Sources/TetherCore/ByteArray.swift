extension Array where Element == UInt8 {
    /// Appends a copy of the bytes in `span`.
    @inlinable
    public mutating func append(copying span: Span<UInt8>) {
        unsafe span.withUnsafeBufferPointer { unsafe self.append(contentsOf: $0) }
    }
}
