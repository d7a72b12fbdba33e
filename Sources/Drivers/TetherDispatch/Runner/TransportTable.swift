public import TetherCore

/// The runner's open transports by generation: a short list searched in order (one transport, or
/// a few while a fallback or a reconnect overlaps), so that finding the transport of an input or a
/// send hashes nothing (a dictionary hashed the generation on every input, twice per request).
@_spi(TetherInternal) public struct TransportTable {
    @usableFromInline var entries: [(generation: TransportGeneration, transport: any Transport)] = []

    @inlinable init() {}

    /// The transport of `generation`; nil when it has none. Setting nil removes it.
    @inlinable package subscript(generation: TransportGeneration) -> (any Transport)? {
        get {
            guard let index = index(of: generation) else { return nil }
            return entries[index].transport
        }
        set {
            let index = index(of: generation)
            switch (index, newValue) {
            case (let index?, let transport?): entries[index].transport = transport
            case (let index?, nil): entries.remove(at: index)
            case (nil, let transport?): entries.append((generation, transport))
            case (nil, nil): break
            }
        }
    }

    /// Removes the transport of `generation` and returns it.
    @inlinable package mutating func remove(_ generation: TransportGeneration) -> (any Transport)? {
        guard let index = index(of: generation) else { return nil }
        return entries.remove(at: index).transport
    }

    /// Every open transport, oldest first.
    @inlinable package var values: [any Transport] { entries.map(\.transport) }

    /// The bytes written to the transports and not yet taken by the network.
    @inlinable package var unsentByteCount: Int {
        var total = 0
        for index in entries.indices { total += entries[index].transport.unsentByteCount }
        return total
    }

    /// Removes every transport.
    @inlinable package mutating func removeAll() { entries.removeAll() }

    @inlinable func index(of generation: TransportGeneration) -> Int? {
        for index in entries.indices where entries[index].generation == generation { return index }
        return nil
    }
}
