/// The members of a large object or map beyond those a `MemberIndex` holds, by key, so that
/// looking one up is not a scan: without it, decoding a dictionary of n members (each lookup
/// scanning the rest of the object) took time in n², and a peer's 1 MiB map kept a decoder busy
/// for minutes. Built only for objects with more than `scanLimit` members past the index; fewer
/// are cheaper to scan. The first member with a given key wins, as in a scan.
@_spi(TetherInternal) public final class MemberTable: Sendable {
    /// Up to this many members past the index are found by scanning instead.
    public static let scanLimit = 16

    /// Value offsets by string key.
    public let byName: [String: Int]
    /// Value offsets by integer key (MessagePack maps).
    public let byInteger: [Int: Int]
    /// Where the first of these members starts in the encoded object (for listing them in order).
    public let start: Int

    /// A table of `members` in wire order (later duplicates of a key are ignored), the first of
    /// which starts at `start`.
    public init(_ members: [(name: String?, integer: Int?, valueStart: Int)], start: Int) {
        var byName: [String: Int] = [:]
        var byInteger: [Int: Int] = [:]
        byName.reserveCapacity(members.count)
        for member in members {
            if let name = member.name, byName[name] == nil { byName[name] = member.valueStart }
            if let integer = member.integer, byInteger[integer] == nil { byInteger[integer] = member.valueStart }
        }
        self.byName = byName
        self.byInteger = byInteger
        self.start = start
    }
}
