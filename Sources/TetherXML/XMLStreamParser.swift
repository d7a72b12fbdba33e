import CExpat
import TetherCore

/// An incremental parser for an endless XML stream (an XMPP stream), built on the system Expat.
///
/// Feed it bytes in any chunking with `append(_:)` and pull events with `next()`: the stream
/// header, each complete depth-1 element as an `XMLElement` tree, and the stream's end. The
/// parser stops after each event (Expat's suspend/resume), so that a stream restart can happen at
/// the exact byte where an element ended: `restart()` resets Expat (never from inside a callback)
/// and returns the bytes that followed, which belong to the next stream (after SASL `<success/>`)
/// or to TLS (after `<proceed/>`).
///
/// Everything RFC 6120 §11 restricts is an error: comments, processing instructions, DTDs,
/// entity declarations and references to undeclared entities (`restricted-xml`); anything not
/// well-formed, including invalid UTF-8 and unbound prefixes (`not-well-formed`); a byte-order
/// mark or an encoding other than UTF-8 (`unsupported-encoding`). Limits (element size counted in
/// raw bytes and enforced while the element arrives, depth, attributes, children) are
/// `policy-violation`s. After an error every call throws it again.
///
/// Expat's reparse deferral (Expat 2.6, and Debian 12's patched 2.5.0 packages) is switched off
/// on every parser and after every reset, so each event is reported as soon as its last byte has
/// been fed, even when the stream arrives one byte at a time.
@safe public struct XMLStreamParser: ~Copyable {
    /// Limits, each a `policy-violation` when exceeded.
    public struct Configuration: Sendable {
        /// The largest top-level element, in raw bytes (default 256 KiB, prosody's
        /// `c2s_stanza_size_limit`). Bytes between elements count too, so a peer cannot make the
        /// parser buffer more than this.
        public var maximumElementSize: Int
        /// The deepest nesting inside a top-level element, counting it as 1 (default 64).
        public var maximumDepth: Int
        /// The most attributes on one element, namespace declarations included (default 64).
        public var maximumAttributes: Int
        /// The most elements in one top-level element, counting it (default 25,000, prosody's
        /// `c2s_max_child_elements`).
        public var maximumElements: Int
        /// The most slots of the parser's name cache (default 512, rounded up to a power of two;
        /// about 80 bytes each, so at most 40 KiB by default). The cache starts with 32 slots and
        /// doubles as names arrive. At most half of the slots hold a name at a time, with 32 bytes
        /// of key space per slot (longer names than 512 bytes are not cached); when either runs
        /// out at full size the cache starts again, so a peer inventing new names costs bounded
        /// memory and only the time to build those names.
        public var nameCacheCapacity: Int

        /// Creates a configuration.
        public init(
            maximumElementSize: Int = 256 * 1024,
            maximumDepth: Int = 64,
            maximumAttributes: Int = 64,
            maximumElements: Int = 25_000,
            nameCacheCapacity: Int = 512
        ) {
            self.maximumElementSize = maximumElementSize
            self.maximumDepth = maximumDepth
            self.maximumAttributes = maximumAttributes
            self.maximumElements = maximumElements
            self.nameCacheCapacity = nameCacheCapacity
        }
    }

    /// How this process's Expat handles reparse deferral.
    public enum ReparseDeferral: Sendable, Equatable {
        /// The library has no reparse deferral (Expat before 2.6, Debian 12 deb12u1).
        case absent
        /// The library defers reparsing by default and the parser switched it off.
        case disabled
        /// Switching it off failed (events may then be reported late).
        case couldNotDisable
    }

    /// Expat and the state its callbacks work on; nil while the buffers are released
    /// (`releaseBuffersWhileIdle()`). The state lives behind a pointer this struct owns
    /// (allocated with Expat, freed with it) rather than in a class, so that the callbacks' many
    /// accesses are not checked for exclusivity at run time. Expat is never called from inside an
    /// access to it, and callbacks only run inside Expat.
    private var core: Core?
    /// While released: the stream header to replay to a fresh Expat before the next bytes (the
    /// root element with its namespace declarations, so that stanzas parse in the same scope).
    private var releasedHeader: [UInt8]?
    private let configuration: Configuration

    @safe private struct Core {
        let parser: XML_Parser
        let state: UnsafeMutablePointer<XMLStreamParserState>
    }

    /// What happened to reparse deferral on this parser.
    public private(set) var reparseDeferral: ReparseDeferral

    /// A parser at the start of a stream.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        reparseDeferral = .absent
        let (core, deferral) = Self.makeCore(configuration)
        self.core = core
        reparseDeferral = deferral
    }

    private static func makeCore(_ configuration: Configuration) -> (Core, ReparseDeferral) {
        // The separator byte 0x1F cannot occur in names or namespace URIs.
        guard let parser = unsafe XML_ParserCreateNS("UTF-8", 0x1F) else {
            fatalError("Expat could not allocate a parser (out of memory)")
        }
        let state = UnsafeMutablePointer<XMLStreamParserState>.allocate(capacity: 1)
        unsafe state.initialize(to: XMLStreamParserState(configuration: configuration, parser: parser))
        unsafe XML_SetReturnNSTriplet(parser, 1)
        let deferral = unsafe Self.configure(parser, state)
        return (unsafe Core(parser: parser, state: state), deferral)
    }

    private static func free(_ core: Core) {
        unsafe XML_ParserFree(core.parser)
        unsafe core.state.deinitialize(count: 1)
        unsafe core.state.deallocate()
    }

    deinit {
        if let core = core { Self.free(core) }
    }

    /// Expat and its state, recreated first if the buffers were released.
    private mutating func active() -> Core {
        if let core = core { return core }
        let (core, deferral) = Self.makeCore(configuration)
        self.core = core
        reparseDeferral = deferral
        if let header = releasedHeader {
            releasedHeader = nil
            // Replay the header; its event is the stream's, already reported once.
            unsafe core.state.pointee.pending = header
            _ = try? next()
        }
        return core
    }

    /// Frees Expat and the parser's buffers while the stream is idle: after the stream header,
    /// between two top-level elements, with no partial element buffered, no error and no event
    /// waiting. The next `append` recreates them (replaying the stream header, so namespace
    /// prefixes declared there keep working). Returns whether it released anything. A connection
    /// that idles for a while calls it to shrink from tens of kilobytes to almost nothing.
    @discardableResult
    public mutating func releaseBuffersWhileIdle() -> Bool {
        guard let core = core, let header = unsafe core.state.pointee.replayableHeader(),
            unsafe core.state.pointee.isIdle
        else { return false }
        Self.free(core)
        self.core = nil
        releasedHeader = header
        return true
    }

    /// Whether the buffers are released (see `releaseBuffersWhileIdle()`).
    public var buffersReleased: Bool { core == nil }

    /// Registers the handlers and settings (again after every reset, which clears them).
    private static func configure(
        _ parser: XML_Parser,
        _ state: UnsafeMutablePointer<XMLStreamParserState>
    ) -> ReparseDeferral {
        unsafe XML_SetUserData(parser, UnsafeMutableRawPointer(state))
        unsafe XML_SetElementHandler(parser, xmlStartElement, xmlEndElement)
        unsafe XML_SetCharacterDataHandler(parser, xmlCharacters)
        unsafe XML_SetStartNamespaceDeclHandler(parser, xmlStartNamespace)
        unsafe XML_SetXmlDeclHandler(parser, xmlDeclaration)
        unsafe XML_SetCommentHandler(parser, xmlComment)
        unsafe XML_SetProcessingInstructionHandler(parser, xmlProcessingInstruction)
        unsafe XML_SetStartDoctypeDeclHandler(parser, xmlDoctype)
        unsafe XML_SetEntityDeclHandler(parser, xmlEntityDeclaration)
        // A second line of defence should a DTD ever get through.
        _ = unsafe XML_SetBillionLaughsAttackProtectionMaximumAmplification(parser, 100.0)
        _ = unsafe XML_SetBillionLaughsAttackProtectionActivationThreshold(parser, 8 << 20)
        switch unsafe cexpat_disable_reparse_deferral(parser) {
        case 1: return .disabled
        case 0: return .couldNotDisable
        default: return .absent
        }
    }

    /// Adds received bytes (copied; parsed by the following `next()` calls).
    public mutating func append(_ bytes: Span<UInt8>) {
        guard !bytes.isEmpty else { return }
        let state = unsafe active().state
        guard unsafe state.pointee.failure == nil else { return }
        unsafe state.pointee.pending.append(copying: bytes)
    }

    /// Whether received bytes are waiting that have not produced an event yet (a partial element).
    public var hasPendingBytes: Bool {
        guard let core = core else { return false }
        return unsafe core.state.pointee.hasPendingBytes
    }

    /// The next event, or nil if more bytes are needed.
    public mutating func next() throws(XMLStreamError) -> XMLStreamEvent? {
        guard let core = core else { return nil }
        let parser = unsafe core.parser
        let state = unsafe core.state
        while true {
            if let failure = unsafe state.pointee.failure { throw failure }
            if let event = unsafe state.pointee.event {
                unsafe state.pointee.event = nil
                return event
            }
            let status: XML_Status
            if unsafe state.pointee.suspended {
                status = unsafe XML_ResumeParser(parser)
            } else if unsafe !state.pointee.pending.isEmpty {
                status = unsafe Self.feedPending(parser, state)
            } else {
                return nil
            }
            unsafe state.pointee.parsed(status)
        }
    }

    /// Feeds every pending byte to Expat.
    private static func feedPending(
        _ parser: XML_Parser,
        _ state: UnsafeMutablePointer<XMLStreamParserState>
    ) -> XML_Status {
        guard unsafe state.pointee.takePending() else { return XML_STATUS_ERROR }
        // A copy of the array reference: the callbacks run during the call and must not overlap
        // an access to the state.
        let chunk = unsafe state.pointee.chunk
        return unsafe chunk.withUnsafeBufferPointer { buffer in
            unsafe XML_Parse(
                parser,
                UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self),
                Int32(buffer.count),
                0
            )
        }
    }

    /// Resets the parser for a new stream (after SASL success or STARTTLS) and returns the bytes
    /// received after the last reported event, which the old stream did not consume.
    ///
    /// Call it right after the event that ends the old stream's life (`<success/>`,
    /// `<proceed/>`); after `<success/>` append the returned bytes again, after `<proceed/>` they
    /// are TLS records.
    public mutating func restart() -> [UInt8] {
        guard let core = core else {
            // Released while idle: nothing is buffered; the next bytes start a fresh stream.
            releasedHeader = nil
            return []
        }
        let remainder = unsafe core.state.pointee.unconsumedBytes()
        _ = unsafe XML_ParserReset(core.parser, "UTF-8")
        unsafe core.state.pointee.reset()
        reparseDeferral = unsafe Self.configure(core.parser, core.state)
        return remainder
    }

    /// The stream error for an Expat error code.
    static func error(for code: XML_Error) -> XMLStreamError {
        let message = unsafe XML_ErrorString(code).map { unsafe String(cString: $0) } ?? "error \(code.rawValue)"
        switch code {
        case XML_ERROR_UNDEFINED_ENTITY, XML_ERROR_RECURSIVE_ENTITY_REF, XML_ERROR_PARAM_ENTITY_REF,
            XML_ERROR_ASYNC_ENTITY, XML_ERROR_BINARY_ENTITY_REF, XML_ERROR_ATTRIBUTE_EXTERNAL_ENTITY_REF,
            XML_ERROR_EXTERNAL_ENTITY_HANDLING, XML_ERROR_ENTITY_DECLARED_IN_PE, XML_ERROR_AMPLIFICATION_LIMIT_BREACH:
            return .init(.restrictedXML, message)
        case XML_ERROR_UNKNOWN_ENCODING, XML_ERROR_INCORRECT_ENCODING:
            return .init(.unsupportedEncoding, message)
        default:
            return .init(.notWellFormed, message)
        }
    }
}

/// The mutable state Expat's callbacks work on (reached through Expat's user data pointer).
@safe struct XMLStreamParserState: ~Copyable {
    let configuration: XMLStreamParser.Configuration
    /// The Expat parser the callbacks run for (the parser struct owns and frees it).
    let parser: XML_Parser
    var builder = XMLTreeBuilder()
    var names: XMLNameCache
    /// Namespace declarations reported for the element about to start (name-table indices).
    var declarations: [UInt32] = []
    /// Namespace declarations reported for the stream header.
    var headerDeclarations: [XMLNamespaceDeclaration] = []
    /// The open stream's root name and declarations (to replay after releasing the buffers).
    var openHeader: (name: XMLName, declarations: [XMLNamespaceDeclaration])?
    /// Scratch space for the cache key of a namespace declaration.
    var declarationKey: [UInt8] = []

    /// Open elements, the stream root included.
    var depth = 0
    /// Elements in the current top-level element.
    var elementCount = 0
    var event: XMLStreamEvent?
    var failure: XMLStreamError?
    var suspended = false

    /// Bytes received but not yet fed to Expat.
    var pending: [UInt8] = []
    /// The bytes of the last `XML_Parse` call (kept to find what follows an event).
    var chunk: [UInt8] = []
    /// The stream offset of `chunk`'s first byte.
    var chunkStart = 0
    /// Bytes fed to Expat since the stream (re)started.
    var totalFed = 0
    /// The stream offset just after the last event (or ignored text between elements).
    var lastBoundary = 0
    /// The stream offset where the current top-level element starts.
    var elementStart = 0

    init(configuration: XMLStreamParser.Configuration, parser: XML_Parser) {
        self.configuration = configuration
        unsafe self.parser = parser
        names = XMLNameCache(capacity: configuration.nameCacheCapacity)
    }

    var hasPendingBytes: Bool {
        !pending.isEmpty || suspended || totalFed > lastBoundary
    }

    /// Inside the stream, between top-level elements, with nothing buffered or waiting.
    var isIdle: Bool {
        failure == nil && event == nil && depth == 1 && !hasPendingBytes
    }

    /// The open stream's header as bytes that recreate its root element and namespace scope.
    func replayableHeader() -> [UInt8]? {
        guard let (name, declarations) = openHeader else { return nil }
        var bytes = Array("<".utf8)
        if let prefix = name.prefix, !prefix.isEmpty { bytes += prefix.utf8 + [UInt8(ascii: ":")] }
        bytes += name.local.utf8
        for declaration in declarations {
            bytes += " xmlns".utf8
            if let prefix = declaration.prefix { bytes += [UInt8(ascii: ":")] + prefix.utf8 }
            bytes += "='".utf8
            XMLSerializer.appendAttributeValue(declaration.uri, &bytes)
            bytes.append(UInt8(ascii: "'"))
        }
        bytes.append(UInt8(ascii: ">"))
        return bytes
    }

    mutating func reset() {
        builder.reset()
        declarations.removeAll(keepingCapacity: true)
        headerDeclarations.removeAll(keepingCapacity: true)
        openHeader = nil
        depth = 0
        elementCount = 0
        event = nil
        failure = nil
        suspended = false
        pending.removeAll(keepingCapacity: true)
        chunk.removeAll(keepingCapacity: true)
        chunkStart = 0
        totalFed = 0
        lastBoundary = 0
        elementStart = 0
    }

    /// Moves the pending bytes to `chunk` for feeding; false (and a failure) if the stream does
    /// not start as UTF-8.
    mutating func takePending() -> Bool {
        swap(&chunk, &pending)
        pending.removeAll(keepingCapacity: true)
        chunkStart = totalFed
        if totalFed == 0, let first = chunk.first, first == 0xEF || first == 0xFE || first == 0xFF || first == 0 {
            // A UTF-8 stream starts with '<' or whitespace; these start byte-order marks or
            // UTF-16/32 text.
            fail(.init(.unsupportedEncoding, "the stream does not start as UTF-8 text (byte-order mark?)"))
            return false
        }
        totalFed += chunk.count
        return true
    }

    /// Takes note of what an `XML_Parse`/`XML_ResumeParser` call returned.
    mutating func parsed(_ status: XML_Status) {
        switch status {
        case XML_STATUS_SUSPENDED:
            suspended = true
        case XML_STATUS_OK:
            suspended = false
            chunk.removeAll(keepingCapacity: true)
        default:
            suspended = false
            fail(XMLStreamParser.error(for: unsafe XML_GetErrorCode(parser)))
        }
        // Bound what the parser holds: the current element (or the bytes since the last
        // element, such as an unfinished start tag) must stay within the size limit.
        if failure == nil, totalFed - lastBoundary > configuration.maximumElementSize {
            tooLarge()
        }
    }

    /// The bytes received after the last event.
    func unconsumedBytes() -> [UInt8] {
        var remainder: [UInt8] = []
        if suspended || !chunk.isEmpty {
            let offset = max(0, lastBoundary - chunkStart)
            if offset < chunk.count { remainder.append(contentsOf: chunk[offset...]) }
        }
        remainder.append(contentsOf: pending)
        return remainder
    }

    /// Whether the current top-level element has grown past the size limit.
    func elementTooLarge() -> Bool {
        currentEnd() - elementStart > configuration.maximumElementSize
    }

    mutating func fail(_ error: XMLStreamError) {
        if failure == nil { failure = error }
        builder.reset()
        pending.removeAll()
        chunk.removeAll()
    }

    /// Fails the stream and aborts parsing.
    mutating func abort(_ error: XMLStreamError) {
        fail(error)
        _ = unsafe XML_StopParser(parser, 0)
    }

    mutating func tooLarge() {
        abort(.init(.policyViolation, "element larger than \(configuration.maximumElementSize) bytes"))
    }

    mutating func tooManyAttributes() {
        let limit = configuration.maximumAttributes
        abort(.init(.policyViolation, "more than \(limit) attributes (namespace declarations included)"))
    }

    /// Ends the current `XML_Parse`/`XML_ResumeParser` call after an event (resumable), noting
    /// where the event's bytes end.
    mutating func stopAfterEvent() {
        lastBoundary = currentEnd()
        _ = unsafe XML_StopParser(parser, 1)
    }

    /// The stream offset just after the current event.
    func currentEnd() -> Int {
        Int(unsafe XML_GetCurrentByteIndex(parser)) + Int(unsafe XML_GetCurrentByteCount(parser))
    }

    // MARK: Callbacks

    mutating func startElement(
        _ rawName: UnsafePointer<CChar>,
        _ rawAttributes: UnsafeMutablePointer<UnsafePointer<CChar>?>?
    ) {
        guard failure == nil else { return }
        let limits = configuration
        if depth == 0 {
            return unsafe startStream(rawName, rawAttributes)
        }
        // Namespace declarations (already reported) count as attributes.
        let declared = declarations.count
        if depth == 1 {
            elementCount = 0
            elementStart = Int(unsafe XML_GetCurrentByteIndex(parser))
        }
        elementCount += 1
        guard depth <= limits.maximumDepth else {
            return abort(.init(.policyViolation, "elements nested deeper than \(limits.maximumDepth)"))
        }
        guard elementCount <= limits.maximumElements else {
            return abort(.init(.policyViolation, "more than \(limits.maximumElements) elements in one element"))
        }
        let name = unsafe names.treeIndex(of: rawName, count: strlen(rawName), in: &builder, make: Self.name)
        let element = builder.startElement(name)
        if !declarations.isEmpty {
            for declaration in declarations { builder.namespaceDeclaration(declaration) }
            declarations.removeAll(keepingCapacity: true)
        }
        if let rawAttributes = unsafe rawAttributes {
            var index = 0
            while let attributeName = unsafe rawAttributes[index], let value = unsafe rawAttributes[index + 1] {
                guard declared + index / 2 < limits.maximumAttributes else { return tooManyAttributes() }
                let name = unsafe names.treeIndex(
                    of: attributeName,
                    count: strlen(attributeName),
                    in: &builder,
                    make: Self.name
                )
                unsafe builder.attribute(name, bytes: UnsafeRawPointer(value), count: strlen(value))
                index += 2
            }
            // Attribute values count like text (see `characters`): bounded while arriving.
            guard builder.text.count <= limits.maximumElementSize else { return tooLarge() }
        }
        builder.endHeader(of: element)
        depth += 1
    }

    /// The stream header (the root element's start tag).
    private mutating func startStream(
        _ rawName: UnsafePointer<CChar>,
        _ rawAttributes: UnsafeMutablePointer<UnsafePointer<CChar>?>?
    ) {
        let name = unsafe names.name(of: rawName, count: strlen(rawName), make: Self.name)
        var attributes: [XMLAttribute] = []
        if let rawAttributes = unsafe rawAttributes {
            var index = 0
            while let attributeName = unsafe rawAttributes[index], let value = unsafe rawAttributes[index + 1] {
                guard headerDeclarations.count + index / 2 < configuration.maximumAttributes else {
                    return tooManyAttributes()
                }
                let attribute = unsafe names.name(of: attributeName, count: strlen(attributeName), make: Self.name)
                unsafe attributes.append(XMLAttribute(attribute, String(cString: value)))
                index += 2
            }
        }
        event = .streamOpen(
            XMLStreamHeader(name: name, attributes: attributes, namespaceDeclarations: headerDeclarations)
        )
        openHeader = (name, headerDeclarations)
        headerDeclarations.removeAll(keepingCapacity: true)
        depth = 1
        stopAfterEvent()
    }

    mutating func endElement() {
        guard failure == nil else { return }
        depth -= 1
        if depth == 0 {
            event = .streamClose
            stopAfterEvent()
            return
        }
        builder.endElement()
        if depth == 1 {
            guard !elementTooLarge() else { return tooLarge() }
            event = .element(builder.finish())
            stopAfterEvent()
        }
    }

    mutating func characters(_ text: UnsafePointer<CChar>, _ length: Int) {
        guard failure == nil else { return }
        if depth >= 2 {
            // Text and attribute values are never longer than the raw bytes they came from, so
            // this bounds memory while the element arrives, without asking Expat for positions;
            // the element's exact raw size is checked when it ends and after every parse call.
            guard builder.text.count + length <= configuration.maximumElementSize else { return tooLarge() }
            unsafe builder.characters(UnsafeRawPointer(text), count: length)
        } else {
            // Text directly inside the stream element (whitespace keep-alives) is ignored.
            lastBoundary = currentEnd()
        }
    }

    mutating func startNamespace(_ prefix: UnsafePointer<CChar>?, _ uri: UnsafePointer<CChar>?) {
        guard failure == nil else { return }
        if depth == 0 {
            guard headerDeclarations.count < configuration.maximumAttributes else { return tooManyAttributes() }
            unsafe headerDeclarations.append(
                XMLNamespaceDeclaration(
                    prefix: prefix.map { unsafe String(cString: $0) },
                    uri: uri.map { unsafe String(cString: $0) } ?? ""
                )
            )
            return
        }
        guard declarations.count < configuration.maximumAttributes else { return tooManyAttributes() }
        // The key: 0x1E (never in a name, so no element or attribute name collides), the prefix,
        // 0x1F, the URI.
        declarationKey.removeAll(keepingCapacity: true)
        declarationKey.append(0x1E)
        if let prefix = unsafe prefix {
            unsafe declarationKey.append(
                contentsOf: UnsafeRawBufferPointer(start: prefix, count: strlen(prefix))
            )
        }
        declarationKey.append(0x1F)
        if let uri = unsafe uri {
            unsafe declarationKey.append(contentsOf: UnsafeRawBufferPointer(start: uri, count: strlen(uri)))
        }
        let key = declarationKey
        let index = unsafe key.withUnsafeBytes { key in
            unsafe names.treeIndex(of: key.baseAddress!, count: key.count, in: &builder, make: Self.declarationName)
        }
        declarations.append(index)
    }

    /// The name for Expat's triplet `uri␟local␟prefix`, `uri␟local` or `local` (valid UTF-8).
    static func name(_ bytes: UnsafeRawBufferPointer) -> XMLName {
        guard let first = unsafe bytes.firstIndex(of: 0x1F) else {
            return unsafe XMLName(String(decoding: bytes, as: UTF8.self))
        }
        let namespace = unsafe String(decoding: bytes[..<first], as: UTF8.self)
        let rest = unsafe bytes[(first + 1)...]
        guard let second = unsafe rest.firstIndex(of: 0x1F) else {
            return unsafe XMLName(String(decoding: rest, as: UTF8.self), namespace: namespace)
        }
        return unsafe XMLName(
            String(decoding: bytes[(first + 1)..<second], as: UTF8.self),
            namespace: namespace,
            prefix: String(decoding: bytes[(second + 1)...], as: UTF8.self)
        )
    }

    /// The name for a declaration key `0x1E prefix 0x1F uri`: prefix and URI.
    static func declarationName(_ bytes: UnsafeRawBufferPointer) -> XMLName {
        let separator = unsafe bytes.firstIndex(of: 0x1F)!
        let prefix = unsafe String(decoding: bytes[1..<separator], as: UTF8.self)
        let uri = unsafe String(decoding: bytes[(separator + 1)...], as: UTF8.self)
        return XMLName("", namespace: uri, prefix: prefix.isEmpty ? nil : prefix)
    }
}

// MARK: - Expat callbacks (C function pointers; the state arrives as user data)

private func parserState(_ userData: UnsafeMutableRawPointer?) -> UnsafeMutablePointer<XMLStreamParserState> {
    unsafe userData!.assumingMemoryBound(to: XMLStreamParserState.self)
}

private let xmlStartElement: XML_StartElementHandler = { userData, rawName, rawAttributes in
    guard let rawName = unsafe rawName else { return }
    unsafe parserState(userData).pointee.startElement(rawName, rawAttributes)
}

private let xmlEndElement: XML_EndElementHandler = { userData, _ in
    unsafe parserState(userData).pointee.endElement()
}

private let xmlCharacters: XML_CharacterDataHandler = { userData, text, length in
    guard let text = unsafe text else { return }
    unsafe parserState(userData).pointee.characters(text, Int(length))
}

private let xmlStartNamespace: XML_StartNamespaceDeclHandler = { userData, prefix, uri in
    unsafe parserState(userData).pointee.startNamespace(prefix, uri)
}

private let xmlDeclaration: XML_XmlDeclHandler = { userData, _, encoding, _ in
    guard let encoding = unsafe encoding.map({ unsafe String(cString: $0) }), encoding.lowercased() != "utf-8" else {
        return
    }
    unsafe parserState(userData).pointee.abort(
        .init(.unsupportedEncoding, "the XML declaration names the encoding \(encoding)")
    )
}

private let xmlComment: XML_CommentHandler = { userData, _ in
    unsafe parserState(userData).pointee.abort(.init(.restrictedXML, "comment"))
}

private let xmlProcessingInstruction: XML_ProcessingInstructionHandler = { userData, _, _ in
    unsafe parserState(userData).pointee.abort(.init(.restrictedXML, "processing instruction"))
}

private let xmlDoctype: XML_StartDoctypeDeclHandler = { userData, _, _, _, _ in
    unsafe parserState(userData).pointee.abort(.init(.restrictedXML, "document type declaration"))
}

private let xmlEntityDeclaration: XML_EntityDeclHandler = { userData, _, _, _, _, _, _, _, _ in
    unsafe parserState(userData).pointee.abort(.init(.restrictedXML, "entity declaration"))
}
