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

        /// Creates a configuration.
        public init(
            maximumElementSize: Int = 256 * 1024,
            maximumDepth: Int = 64,
            maximumAttributes: Int = 64,
            maximumElements: Int = 25_000
        ) {
            self.maximumElementSize = maximumElementSize
            self.maximumDepth = maximumDepth
            self.maximumAttributes = maximumAttributes
            self.maximumElements = maximumElements
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

    private let parser: XML_Parser
    private let state: XMLStreamParserState

    /// What happened to reparse deferral on this parser.
    public private(set) var reparseDeferral: ReparseDeferral

    /// A parser at the start of a stream.
    public init(configuration: Configuration = Configuration()) {
        state = XMLStreamParserState(configuration: configuration)
        // The separator byte 0x1F cannot occur in names or namespace URIs.
        guard let parser = unsafe XML_ParserCreateNS("UTF-8", 0x1F) else {
            fatalError("Expat could not allocate a parser (out of memory)")
        }
        unsafe self.parser = parser
        unsafe XML_SetReturnNSTriplet(parser, 1)
        reparseDeferral = .absent
        reparseDeferral = unsafe Self.configure(parser, state)
    }

    deinit {
        unsafe XML_ParserFree(parser)
    }

    /// Registers the handlers and settings (again after every reset, which clears them).
    private static func configure(_ parser: XML_Parser, _ state: XMLStreamParserState) -> ReparseDeferral {
        unsafe state.parser = parser
        unsafe XML_SetUserData(parser, Unmanaged.passUnretained(state).toOpaque())
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
        guard state.failure == nil else { return }
        state.pending.append(copying: bytes)
    }

    /// Whether received bytes are waiting that have not produced an event yet (a partial element).
    public var hasPendingBytes: Bool {
        !state.pending.isEmpty || state.suspended || state.totalFed > state.lastBoundary
    }

    /// The next event, or nil if more bytes are needed.
    public mutating func next() throws(XMLStreamError) -> XMLStreamEvent? {
        while true {
            if let failure = state.failure { throw failure }
            if let event = state.event {
                state.event = nil
                return event
            }
            let status: XML_Status
            if state.suspended {
                status = unsafe XML_ResumeParser(parser)
            } else if !state.pending.isEmpty {
                status = feedPending()
            } else {
                return nil
            }
            switch status {
            case XML_STATUS_SUSPENDED:
                state.suspended = true
            case XML_STATUS_OK:
                state.suspended = false
                state.chunk.removeAll(keepingCapacity: true)
            default:
                state.suspended = false
                state.fail(Self.error(for: unsafe XML_GetErrorCode(parser)))
            }
            // Bound what the parser holds: the current element (or the bytes since the last
            // element, such as an unfinished start tag) must stay within the size limit.
            if state.failure == nil, state.totalFed - state.lastBoundary > state.configuration.maximumElementSize {
                tooLarge(state)
            }
        }
    }

    /// Feeds every pending byte to Expat.
    private mutating func feedPending() -> XML_Status {
        swap(&state.chunk, &state.pending)
        state.pending.removeAll(keepingCapacity: true)
        state.chunkStart = state.totalFed
        if state.totalFed == 0, let first = state.chunk.first,
            first == 0xEF || first == 0xFE || first == 0xFF || first == 0
        {
            // A UTF-8 stream starts with '<' or whitespace; these start byte-order marks or
            // UTF-16/32 text.
            state.fail(.init(.unsupportedEncoding, "the stream does not start as UTF-8 text (byte-order mark?)"))
            return XML_STATUS_ERROR
        }
        state.totalFed += state.chunk.count
        let count = Int32(state.chunk.count)
        return unsafe state.chunk.withUnsafeBufferPointer { buffer in
            unsafe XML_Parse(
                parser,
                UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self),
                count,
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
        var remainder: [UInt8] = []
        if state.suspended || !state.chunk.isEmpty {
            let offset = max(0, state.lastBoundary - state.chunkStart)
            if offset < state.chunk.count { remainder.append(contentsOf: state.chunk[offset...]) }
        }
        remainder.append(contentsOf: state.pending)
        _ = unsafe XML_ParserReset(parser, "UTF-8")
        state.reset()
        reparseDeferral = unsafe Self.configure(parser, state)
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
@safe final class XMLStreamParserState {
    let configuration: XMLStreamParser.Configuration
    /// The Expat parser the callbacks run for (set once; the parser struct owns and frees it).
    var parser: XML_Parser?
    var builder = XMLTreeBuilder()
    var names = StringInterner(capacity: 4096)
    /// Namespace declarations reported for the element about to start.
    var declarations: [XMLNamespaceDeclaration] = []

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

    init(configuration: XMLStreamParser.Configuration) {
        self.configuration = configuration
    }

    func reset() {
        builder.reset()
        declarations.removeAll(keepingCapacity: true)
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

    /// Whether the current top-level element has grown past the size limit.
    func elementTooLarge() -> Bool {
        currentEnd() - elementStart > configuration.maximumElementSize
    }

    func fail(_ error: XMLStreamError) {
        if failure == nil { failure = error }
        builder.reset()
        pending.removeAll()
        chunk.removeAll()
    }

    /// Splits an Expat triplet name (`uri␟local␟prefix`, `uri␟local` or `local`) into a name.
    func name(_ raw: UnsafePointer<CChar>) -> XMLName {
        let bytes = unsafe UnsafeRawPointer(raw).assumingMemoryBound(to: UInt8.self)
        let length = unsafe strlen(raw)
        let span = unsafe Span(_unsafeStart: bytes, count: length)
        guard let first = ByteScanning.firstIndex(of: 0x1F, in: span, from: 0, to: length) else {
            return XMLName(names.intern(span))
        }
        let namespace = names.intern(span.extracting(0..<first))
        guard let second = ByteScanning.firstIndex(of: 0x1F, in: span, from: first + 1, to: length) else {
            return XMLName(names.intern(span.extracting((first + 1)..<length)), namespace: namespace)
        }
        return XMLName(
            names.intern(span.extracting((first + 1)..<second)),
            namespace: namespace,
            prefix: names.intern(span.extracting((second + 1)..<length))
        )
    }

    func string(_ raw: UnsafePointer<CChar>?) -> String? {
        guard let raw = unsafe raw else { return nil }
        return unsafe String(cString: raw)
    }

    /// The stream offset just after the current event.
    func currentEnd() -> Int {
        Int(unsafe XML_GetCurrentByteIndex(parser)) + Int(unsafe XML_GetCurrentByteCount(parser))
    }
}

// MARK: - Expat callbacks (C function pointers; the state arrives as user data)

private func parserState(_ userData: UnsafeMutableRawPointer?) -> XMLStreamParserState {
    unsafe Unmanaged<XMLStreamParserState>.fromOpaque(userData!).takeUnretainedValue()
}

/// Ends the current `XML_Parse`/`XML_ResumeParser` call after an event (resumable), noting
/// where the event's bytes end.
private func stopAfterEvent(_ state: XMLStreamParserState) {
    state.lastBoundary = state.currentEnd()
    _ = unsafe XML_StopParser(state.parser, 1)
}

private func tooManyAttributes(_ state: XMLStreamParserState) {
    let limit = state.configuration.maximumAttributes
    abort(state, .init(.policyViolation, "more than \(limit) attributes (namespace declarations included)"))
}

func tooLarge(_ state: XMLStreamParserState) {
    abort(state, .init(.policyViolation, "element larger than \(state.configuration.maximumElementSize) bytes"))
}

/// Fails the stream and aborts parsing.
private func abort(_ state: XMLStreamParserState, _ error: XMLStreamError) {
    state.fail(error)
    _ = unsafe XML_StopParser(state.parser, 0)
}

private let xmlStartElement: XML_StartElementHandler = { userData, rawName, rawAttributes in
    let state = unsafe parserState(userData)
    guard state.failure == nil, let rawName = unsafe rawName else { return }
    let name = unsafe state.name(rawName)
    let limits = state.configuration
    // Namespace declarations (already reported) count as attributes.
    let declared = state.declarations.count
    if state.depth == 0 {
        var attributes: [XMLAttribute] = []
        var index = 0
        while let attributeName = unsafe rawAttributes?[index], let value = unsafe rawAttributes?[index + 1] {
            guard declared + index / 2 < limits.maximumAttributes else { return tooManyAttributes(state) }
            unsafe attributes.append(XMLAttribute(state.name(attributeName), String(cString: value)))
            index += 2
        }
        state.event = .streamOpen(
            XMLStreamHeader(name: name, attributes: attributes, namespaceDeclarations: state.declarations)
        )
        state.declarations.removeAll(keepingCapacity: true)
        state.depth = 1
        stopAfterEvent(state)
        return
    }
    if state.depth == 1 {
        state.elementCount = 0
        state.elementStart = Int(unsafe XML_GetCurrentByteIndex(state.parser))
    }
    state.elementCount += 1
    guard state.depth <= limits.maximumDepth else {
        return abort(state, .init(.policyViolation, "elements nested deeper than \(limits.maximumDepth)"))
    }
    guard state.elementCount <= limits.maximumElements else {
        return abort(state, .init(.policyViolation, "more than \(limits.maximumElements) elements in one element"))
    }
    state.builder.startElement(name)
    for declaration in state.declarations {
        state.builder.namespaceDeclaration(prefix: declaration.prefix, uri: declaration.uri)
    }
    state.declarations.removeAll(keepingCapacity: true)
    var index = 0
    while let attributeName = unsafe rawAttributes?[index], let value = unsafe rawAttributes?[index + 1] {
        guard declared + index / 2 < limits.maximumAttributes else { return tooManyAttributes(state) }
        let length = unsafe strlen(value)
        let bytes = unsafe UnsafeRawPointer(value).assumingMemoryBound(to: UInt8.self)
        unsafe state.builder.attribute(state.name(attributeName), value: Span(_unsafeStart: bytes, count: length))
        index += 2
    }
    state.depth += 1
}

private let xmlEndElement: XML_EndElementHandler = { userData, _ in
    let state = unsafe parserState(userData)
    guard state.failure == nil else { return }
    state.depth -= 1
    if state.depth == 0 {
        state.event = .streamClose
        stopAfterEvent(state)
        return
    }
    state.builder.endElement()
    if state.depth == 1 {
        guard !state.elementTooLarge() else { return tooLarge(state) }
        state.event = .element(state.builder.finish())
        stopAfterEvent(state)
    }
}

private let xmlCharacters: XML_CharacterDataHandler = { userData, text, length in
    let state = unsafe parserState(userData)
    guard state.failure == nil, let text = unsafe text else { return }
    if state.depth >= 2 {
        guard !state.elementTooLarge() else { return tooLarge(state) }
        let bytes = unsafe UnsafeRawPointer(text).assumingMemoryBound(to: UInt8.self)
        unsafe state.builder.characters(Span(_unsafeStart: bytes, count: Int(length)))
    } else {
        // Text directly inside the stream element (whitespace keep-alives) is ignored.
        state.lastBoundary = state.currentEnd()
    }
}

private let xmlStartNamespace: XML_StartNamespaceDeclHandler = { userData, prefix, uri in
    let state = unsafe parserState(userData)
    guard state.failure == nil else { return }
    guard state.declarations.count < state.configuration.maximumAttributes else { return tooManyAttributes(state) }
    unsafe state.declarations.append(
        XMLNamespaceDeclaration(prefix: state.string(prefix), uri: state.string(uri) ?? "")
    )
}

private let xmlDeclaration: XML_XmlDeclHandler = { userData, _, encoding, _ in
    let state = unsafe parserState(userData)
    if let encoding = unsafe state.string(encoding), encoding.lowercased() != "utf-8" {
        abort(state, .init(.unsupportedEncoding, "the XML declaration names the encoding \(encoding)"))
    }
}

private let xmlComment: XML_CommentHandler = { userData, _ in
    unsafe abort(parserState(userData), .init(.restrictedXML, "comment"))
}

private let xmlProcessingInstruction: XML_ProcessingInstructionHandler = { userData, _, _ in
    unsafe abort(parserState(userData), .init(.restrictedXML, "processing instruction"))
}

private let xmlDoctype: XML_StartDoctypeDeclHandler = { userData, _, _, _, _ in
    unsafe abort(parserState(userData), .init(.restrictedXML, "document type declaration"))
}

private let xmlEntityDeclaration: XML_EntityDeclHandler = { userData, _, _, _, _, _, _, _, _ in
    unsafe abort(parserState(userData), .init(.restrictedXML, "entity declaration"))
}
