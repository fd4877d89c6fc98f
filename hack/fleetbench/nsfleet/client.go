package nsfleet

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// nsClient is one virtual cluster's client: the shared member's client
// (reads from the shared cache, writes to the API server) with the hub's
// namespaces rewritten to the cluster's namespaces of the member on the
// way in, and back on the way out.
type nsClient struct {
	client.Client
	name string
}

func (c *nsClient) to(ns string) string {
	if ns == "" {
		return ""
	}
	return NamespaceOf(c.name, ns)
}

// around runs fn with obj in the member's namespace, and puts the hub's
// back whatever fn did to obj.
func (c *nsClient) around(obj client.Object, fn func() error) error {
	ns := obj.GetNamespace()
	obj.SetNamespace(c.to(ns))
	defer obj.SetNamespace(ns)
	return fn()
}

func (c *nsClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	hubNS := key.Namespace
	key.Namespace = c.to(hubNS)
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	obj.SetNamespace(hubNS)
	return nil
}

// List lists one namespace of the cluster: a virtual cluster has no
// cluster-wide list of its own.
func (c *nsClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := &client.ListOptions{}
	lo.ApplyOptions(opts)
	hubNS := lo.Namespace
	if hubNS == "" {
		return errors.New("nsfleet: a virtual cluster lists one namespace at a time")
	}
	lo.Namespace = c.to(hubNS)
	if err := c.Client.List(ctx, list, lo); err != nil {
		return err
	}
	return meta.EachListItem(list, func(o runtime.Object) error {
		if obj, ok := o.(client.Object); ok {
			obj.SetNamespace(hubNS)
		}
		return nil
	})
}

func (c *nsClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.around(obj, func() error { return c.Client.Create(ctx, obj, opts...) })
}

func (c *nsClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.around(obj, func() error { return c.Client.Update(ctx, obj, opts...) })
}

func (c *nsClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.around(obj, func() error { return c.Client.Patch(ctx, obj, patch, opts...) })
}

func (c *nsClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return c.around(obj, func() error { return c.Client.Delete(ctx, obj, opts...) })
}

func (c *nsClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	do := &client.DeleteAllOfOptions{}
	do.ApplyOptions(opts)
	if do.Namespace == "" {
		return errors.New("nsfleet: a virtual cluster deletes in one namespace at a time")
	}
	do.Namespace = c.to(do.Namespace)
	return c.Client.DeleteAllOf(ctx, obj, do)
}

func (c *nsClient) Status() client.SubResourceWriter { return &nsStatus{c: c, w: c.Client.Status()} }

// nsStatus writes the status subresource in the member's namespace.
type nsStatus struct {
	c *nsClient
	w client.SubResourceWriter
}

func (s *nsStatus) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	return s.c.around(obj, func() error { return s.w.Create(ctx, obj, sub, opts...) })
}

func (s *nsStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return s.c.around(obj, func() error { return s.w.Update(ctx, obj, opts...) })
}

func (s *nsStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	return s.c.around(obj, func() error { return s.w.Patch(ctx, obj, patch, opts...) })
}

func (s *nsStatus) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return errors.New("nsfleet: apply configurations are not mapped")
}

// Apply is not mapped: an apply configuration carries its namespace where
// the wrapper cannot rewrite it.
func (c *nsClient) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return errors.New("nsfleet: apply configurations are not mapped")
}
