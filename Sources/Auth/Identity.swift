/// Who is calling, once authenticated: the configured id of a static token, or the `sub` claim of a JWT
/// (RFC 7519 section 4.1.2) together with its issuer, since a subject is only unique within one issuer.
public struct Identity: Sendable, Hashable, CustomStringConvertible {
    /// Which mechanism authenticated the caller.
    public enum Kind: String, Sendable, Hashable {
        case staticToken = "static"
        case jwt
    }

    public var id: String
    public var kind: Kind
    /// The JWT's `iss`; nil for static tokens.
    public var issuer: String?

    public init(id: String, kind: Kind, issuer: String? = nil) {
        self.id = id
        self.kind = kind
        self.issuer = issuer
    }

    public var description: String {
        if let issuer { return "\(kind.rawValue):\(id)@\(issuer)" }
        return "\(kind.rawValue):\(id)"
    }
}
