package staging

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestPrometheusQuery(t *testing.T) {
	g := NewWithT(t)
	g.Expect(PrometheusQuery(`sum(rate(errors_total{namespace=~"$namespaces"}[1m]))`, []string{"shop.eu", "canary"})).
		To(Equal(`sum(rate(errors_total{namespace=~"^(?:canary|shop\.eu)$"}[1m]))`))
}

func TestPrometheusValue(t *testing.T) {
	g := NewWithT(t)
	v, err := PrometheusValue([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"value":[1700000000.1,"2"]},{"metric":{"a":"2"},"value":[1700000000.1,"0.5"]}]}}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(Equal(2.5))
	v, err = PrometheusValue([]byte(`{"status":"success","data":{"resultType":"vector","result":[]}}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(BeZero())
	v, err = PrometheusValue([]byte(`{"status":"success","data":{"resultType":"scalar","result":[1700000000.1,"7"]}}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(Equal(7.0))
	_, err = PrometheusValue([]byte(`{"status":"error","errorType":"bad_data","error":"parse error at char 4"}`))
	g.Expect(err).To(MatchError(ContainSubstring("the query failed: bad_data: parse error")))
	_, err = PrometheusValue([]byte(`{"status":"success","data":{"resultType":"matrix","result":[]}}`))
	g.Expect(err).To(MatchError(ContainSubstring("scalar or an instant vector")))
}
